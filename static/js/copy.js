// A "Copy" button for a read-only value (data-copy-from names its input): shown only where the clipboard API works;
// without it the value stays selectable by hand.
(function () {
  for (const button of document.querySelectorAll("button[data-copy-from]")) {
    const source = document.getElementById(button.dataset.copyFrom);
    const status = document.getElementById(button.dataset.copyStatus);
    if (!source || !navigator.clipboard || !window.isSecureContext) continue;
    button.hidden = false;
    button.addEventListener("click", async () => {
      source.select();
      try {
        await navigator.clipboard.writeText(source.value);
        if (status) status.textContent = "Copied to the clipboard.";
      } catch (error) {
        if (status) status.textContent = "Copying failed: the token is selected, copy it with Ctrl+C or ⌘C.";
      }
    });
  }
})();

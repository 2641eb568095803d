// The attempt page's editor (Ace, vendored in static/vendor/ace-1.45.2), its ticking clock, and the counts sent with
// the body: keystrokes and paste events (when and how many characters) in this editor only. Without this script
// the page is a plain form: the textarea posts the body and no counts are sent.
(function () {
  "use strict";
  var clock = document.getElementById("attempt-clock");
  var loadedAt = Date.now();
  function elapsed() {
    var base = clock ? parseFloat(clock.dataset.elapsed || "0") : 0;
    return base + (clock && clock.dataset.running ? (Date.now() - loadedAt) / 1000 : 0);
  }
  function show(seconds) {
    var whole = Math.round(seconds);
    var rest = whole % 60;
    return Math.floor(whole / 60) + " min " + (rest < 10 ? "0" : "") + rest + " s";
  }
  if (clock && clock.dataset.running) {
    setInterval(function () { clock.textContent = show(elapsed()); }, 1000);
  }

  var form = document.getElementById("attempt-form");
  if (!form) return;
  var textarea = document.getElementById("attempt-body");
  var keystrokes = 0;
  var pastes = [];
  var modifiers = { Shift: 1, Control: 1, Alt: 1, Meta: 1, CapsLock: 1 };
  function counted(event) { if (!modifiers[event.key]) keystrokes += 1; }
  function pasted(text) { pastes.push({ at: Math.round(elapsed() * 1000) / 1000, chars: text.length }); }
  var editor = null;

  if (window.ace) {
    var holder = document.createElement("div");
    holder.className = "code-editor";
    holder.setAttribute("data-testid", "code-editor");
    textarea.parentNode.insertBefore(holder, textarea);
    textarea.hidden = true;
    textarea.required = false;
    editor = window.ace.edit(holder, {
      mode: "ace/mode/python",
      theme: "ace/theme/textmate",
      tabSize: 4,
      useSoftTabs: true,
      minLines: 12,
      maxLines: 40,
      showPrintMargin: false,
      fontSize: "14px",
    });
    editor.setValue(textarea.value, 1);
    editor.textInput.getElement().setAttribute("aria-label", "Your snippet body (Python)");
    editor.container.addEventListener("keydown", counted, true);
    editor.on("paste", function (event) { pasted(event.text || ""); });
  } else {
    textarea.addEventListener("keydown", counted);
    textarea.addEventListener("paste", function (event) {
      pasted((event.clipboardData && event.clipboardData.getData("text")) || "");
    });
  }

  var error = document.getElementById("attempt-body_error");
  form.addEventListener("submit", function (event) {
    if (editor) textarea.value = editor.getValue();
    if (!textarea.value.trim()) {
      // Said beside the editor, as the server says it; nothing typed is lost (an empty body only stays here).
      event.preventDefault();
      error.textContent = error.dataset.empty;
      error.hidden = false;
      error.closest(".field").classList.add("invalid");
      if (editor) editor.focus(); else textarea.focus();
      return;
    }
    document.getElementById("attempt-keystrokes").value = String(keystrokes);
    document.getElementById("attempt-pastes").value = JSON.stringify(pastes);
  });
})();

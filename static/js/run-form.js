// The run-start form shows the agent budget only in agent mode; without JavaScript it stays shown and the server
// ignores it for a single-shot run.
(function () {
  for (const form of document.querySelectorAll("form[data-run-form]")) {
    const budget = form.querySelector("[data-agent-budget]");
    const mode = form.querySelector("[name=mode]");
    if (!budget || !mode) continue;
    const show = () => {
      const agent = mode.value === "agent";
      budget.hidden = !agent;
      budget.disabled = !agent; // disabled fields are not sent
    };
    mode.addEventListener("change", show);
    show();
  }
})();

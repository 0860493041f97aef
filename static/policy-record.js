// The Content-Security-Policy refuses inline handlers (onclick=...), so the Print button is wired here.
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button[data-print]")) {
    button.addEventListener("click", () => window.print());
  }
});

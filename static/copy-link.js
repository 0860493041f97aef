// Copy buttons: <button data-copy="#input-id"> copies that input's value (no inline handlers: the CSP forbids them).
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const input = document.querySelector(button.dataset.copy);
  if (!input) return;
  try {
    await navigator.clipboard.writeText(input.value);
  } catch {
    input.select(); // no clipboard permission (plain HTTP on another host): leave it selected to copy by hand
    return;
  }
  const note = document.querySelector(`[data-copied-for="${button.dataset.copy}"]`);
  if (note) note.hidden = false;
});

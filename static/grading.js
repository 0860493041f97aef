// Keyboard grading: 1 correct, 2 incorrect, 3 unsure, s skip; and the seconds an item was on screen.
(function () {
  "use strict";
  var shownAt = performance.now();
  var keys = { "1": "button[name=verdict][value=correct]", "2": "button[name=verdict][value=incorrect]",
               "3": "button[name=verdict][value=unsure]", "s": "button[data-key=s]", "S": "button[data-key=s]",
               "n": "button[data-key=n]", "N": "button[data-key=n]" };

  // The only swaps on this page bring a new item.
  document.addEventListener("htmx:afterSwap", function () { shownAt = performance.now(); });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) { return; }
    var target = event.target;
    if (target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT" || target.isContentEditable)) {
      if (event.key === "Escape") { target.blur(); }
      return;
    }
    var selector = keys[event.key];
    var button = selector && document.querySelector("#grading-item " + selector);
    if (button && !button.disabled) {
      event.preventDefault();
      button.click();
    }
  });

  // Runs before htmx reads the form (capture phase), so the request carries the time on screen.
  document.addEventListener("submit", function (event) {
    var field = event.target.querySelector && event.target.querySelector("input[name=seconds_spent]");
    if (field) { field.value = ((performance.now() - shownAt) / 1000).toFixed(1); }
  }, true);
})();

// Keyboard grading: 1 correct, 2 incorrect, 3 unsure, s skip, u undo the last grade; the seconds an
// item was on screen; and bringing each new item into view with the focus on it.
(function () {
  "use strict";
  var shownAt = performance.now();
  var keys = { "1": "button[name=verdict][value=correct]", "2": "button[name=verdict][value=incorrect]",
               "3": "button[name=verdict][value=unsure]", "s": "button[data-key=s]", "S": "button[data-key=s]",
               "n": "button[data-key=n]", "N": "button[data-key=n]", "u": "button[data-key=u]",
               "U": "button[data-key=u]" };

  // The grader was usually scrolled down to the verdict buttons; the swap keeps that scroll
  // position, which would leave the new item's question above the screen. Put the region's top
  // (progress, what was saved, then the question) at the top of the viewport and move the focus
  // there, so screen readers start at the new item and no key lands on a button that is gone.
  function showItem(region) {
    var heading = region.querySelector("#item-question");
    if (heading) {
      var top = heading.getBoundingClientRect().top;
      if (top < 0 || top > window.innerHeight * 0.4) { region.scrollIntoView({ block: "start" }); }
      region.focus({ preventScroll: true });
    } else {
      var start = region.querySelector("button[data-key=n]");  // the queue is empty: offer to look again
      if (start) { start.focus({ preventScroll: true }); }
    }
  }

  // Other regions of the page (the navigation's counters) swap too; only the item region brings an item.
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (!(target && target.id === "grading-item") && !(event.target && event.target.id === "grading-item")) {
      return;
    }
    var region = document.getElementById("grading-item");
    if (!region) { return; }
    shownAt = performance.now();
    showItem(region);
  });

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
      // htmx takes over newly swapped content a moment after the swap; a key pressed within that
      // moment would let the browser post the form itself and reload the page. Processing the form
      // now is a no-op when htmx already has.
      if (window.htmx && button.form) { window.htmx.process(button.form); }
      button.click();
    }
  });

  // Runs before htmx reads the form (capture phase), so the request carries the time on screen.
  document.addEventListener("submit", function (event) {
    var field = event.target.querySelector && event.target.querySelector("input[name=seconds_spent]");
    if (field) { field.value = ((performance.now() - shownAt) / 1000).toFixed(1); }
  }, true);
})();

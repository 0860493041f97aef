// Keyboard grading: 1 correct, 2 incorrect, 3 unsure, s skip, u undo the last grade; the seconds an
// item was on screen; and bringing each new item into view with the focus on it. A long answer is
// graded claim by claim: 1 supported, 2 not supported, 3 not verifiable mark the current claim and
// move to the next; j/k or the arrow keys move between claims; Enter submits once every claim is marked.
(function () {
  "use strict";
  var shownAt = performance.now();
  var claimKeys = { "1": "supported", "2": "unsupported", "3": "unverifiable" };
  var current = 0;

  function claimForm() { return document.querySelector("#grading-item form.grade[data-claims]"); }
  function claimsOf(form) { return Array.prototype.slice.call(form.querySelectorAll("li.claim")); }
  function marked(claim) { return !!claim.querySelector("input[type=radio]:checked"); }

  function showClaim(form, index) {
    var claims = claimsOf(form);
    if (!claims.length) { return; }
    current = Math.max(0, Math.min(index, claims.length - 1));
    claims.forEach(function (claim, i) {
      claim.classList.toggle("current", i === current);
      if (i === current) { claim.setAttribute("aria-current", "step"); } else { claim.removeAttribute("aria-current"); }
    });
    var box = claims[current].getBoundingClientRect();
    if (box.top < 0 || box.bottom > window.innerHeight) { claims[current].scrollIntoView({ block: "nearest" }); }
  }

  // The submit button waits until every claim is marked (the server checks it again).
  function updateClaims(form) {
    var claims = claimsOf(form);
    var done = claims.filter(marked).length;
    var submit = form.querySelector("button[data-claims-submit]");
    if (submit) { submit.disabled = done < claims.length; }
    var status = form.querySelector("[data-claims-marked]");
    if (status) {
      status.textContent = done < claims.length ? done + " of " + claims.length + " claims marked." : "Every claim is marked.";
    }
  }

  function startClaims() {
    var form = claimForm();
    if (!form) { return; }
    updateClaims(form);
    showClaim(form, 0);
  }

  function claimKey(event, form) {
    var key = event.key;
    var claims = claimsOf(form);
    if (claimKeys[key]) {
      var claim = claims[current];
      var input = claim && claim.querySelector("input[value=" + claimKeys[key] + "]");
      if (!input) { return false; }
      input.checked = true;
      updateClaims(form);
      showClaim(form, current + 1);
      return true;
    }
    if (key === "j" || key === "ArrowDown" || key === "ArrowRight") { showClaim(form, current + 1); return true; }
    if (key === "k" || key === "ArrowUp" || key === "ArrowLeft") { showClaim(form, current - 1); return true; }
    if (key === "Enter") {
      var on = event.target && event.target.tagName;
      if (on === "BUTTON" || on === "A" || on === "SUMMARY") { return false; }  // the focused control's own Enter
      var first = claims.findIndex(function (c) { return !marked(c); });
      if (first >= 0) { showClaim(form, first); return true; }
      var submit = form.querySelector("button[data-claims-submit]");
      if (window.htmx) { window.htmx.process(form); }
      if (submit) { submit.disabled = false; submit.click(); }
      return true;
    }
    return false;
  }

  // A click on a claim's choice makes that claim the current one.
  document.addEventListener("change", function (event) {
    var form = claimForm();
    var claim = event.target && event.target.closest && event.target.closest("li.claim");
    if (!form || !claim || !form.contains(claim)) { return; }
    updateClaims(form);
    showClaim(form, claimsOf(form).indexOf(claim));
  });
  document.addEventListener("DOMContentLoaded", startClaims);
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
    startClaims();
  });

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) { return; }
    var target = event.target;
    var choice = target && target.tagName === "INPUT" && target.type === "radio";  // a claim's choice keeps the keys
    if (target && !choice && (target.tagName === "TEXTAREA" || target.tagName === "INPUT" || target.isContentEditable)) {
      if (event.key === "Escape") { target.blur(); }
      return;
    }
    var form = claimForm();
    if (form && claimKey(event, form)) {
      event.preventDefault();
      return;
    }
    if (choice) { return; }
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

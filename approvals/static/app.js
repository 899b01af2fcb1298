// Live countdowns; an expired card disables its buttons. Submitting
// disables them too, so a double click sends one decision.
(function () {
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-expires]").forEach(function (el) {
      var left = Math.floor((Date.parse(el.dataset.expires) - now) / 1000);
      var out = el.querySelector(".countdown");
      if (left <= 0) {
        el.classList.add("expired");
        if (out) out.textContent = "expired";
        el.querySelectorAll(".decide button").forEach(function (b) { b.disabled = true; });
        var note = el.querySelector(".expired-note");
        if (note) note.hidden = false;
        return;
      }
      var m = Math.floor(left / 60), s = left % 60;
      if (out) out.textContent = m + ":" + (s < 10 ? "0" : "") + s + " left";
    });
  }
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.classList.contains("decide")) return;
    var card = form.closest("[data-expires]");
    if (form.dataset.sent || (card && card.classList.contains("expired"))) { e.preventDefault(); return; }
    form.dataset.sent = "1";
    var chosen = e.submitter;
    if (chosen) {
      var keep = document.createElement("input");
      keep.type = "hidden"; keep.name = chosen.name; keep.value = chosen.value;
      form.appendChild(keep);
    }
    setTimeout(function () { form.querySelectorAll("button").forEach(function (b) { b.disabled = true; }); }, 0);
  });
  tick();
  setInterval(tick, 1000);
})();

/* dryz's documentation site: a table wider than the main column becomes cards (docs/stylesheets/dryz.css,
   table.dryz-cards): every cell is labelled with its column's name, so a card reads without the header row.
   Runs on every page Material shows (its document$ observable: instant navigation too). */
function dryzCards() {
  document.querySelectorAll(".md-typeset table:not(.dryz-cards):not(.dz-grid)").forEach(function (table) {
    var box = table.closest(".md-typeset__scrollwrap") || table.parentElement;
    if (table.scrollWidth <= box.clientWidth + 1) return;
    var heads = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
      return th.textContent.trim();
    });
    table.querySelectorAll("tbody tr").forEach(function (tr) {
      Array.prototype.forEach.call(tr.children, function (td, i) { td.setAttribute("data-label", heads[i] || ""); });
    });
    table.classList.add("dryz-cards");
  });
}
/* Inline code wraps only at its spaces: each run of non-space characters is one unbreakable word. */
function dryzWords() {
  document.querySelectorAll(".md-typeset :not(pre) > code:not(.dryz-words)").forEach(function (code) {
    code.classList.add("dryz-words");
    if (code.children.length || !/\s/.test(code.textContent.trim())) {
      if (!code.children.length) code.style.whiteSpace = "nowrap";
      return;
    }
    var parts = code.textContent.split(/(\s+)/);
    code.textContent = "";
    parts.forEach(function (part) {
      if (!part) return;
      if (/^\s+$/.test(part)) { code.appendChild(document.createTextNode(part)); return; }
      var w = document.createElement("span");
      w.className = "dryz-word";
      w.textContent = part;
      code.appendChild(w);
    });
  });
}
function dryzPage() { dryzWords(); dryzCards(); }
if (typeof document$ !== "undefined") { document$.subscribe(dryzPage); } else { window.addEventListener("load", dryzPage); }
window.addEventListener("resize", function () {
  document.querySelectorAll(".md-typeset table.dryz-cards").forEach(function (t) { t.classList.remove("dryz-cards"); });
  dryzCards();
});

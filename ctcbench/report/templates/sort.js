// Click a column header of a table.sortable to sort by it; click again to reverse. Cells sort by
// their data-v (a number) when they have one, else by their text; empty cells always sort last.
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var dir = th.dataset.dir === "asc" ? "desc" : "asc";
      table.querySelectorAll("thead th").forEach(function (h) { delete h.dataset.dir; });
      th.dataset.dir = dir;
      var key = function (row) {
        var cell = row.cells[col];
        var v = cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent.trim();
        if (v === "") return null;
        var n = Number(v);
        return isNaN(n) ? v.toLowerCase() : n;
      };
      var body = table.tBodies[0];
      Array.from(body.rows).sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null || y === null) return x === y ? 0 : (x === null ? 1 : -1);
        var c = (typeof x === typeof y) ? (x < y ? -1 : x > y ? 1 : 0) : (typeof x === "number" ? -1 : 1);
        return dir === "asc" ? c : -c;
      }).forEach(function (row) { body.appendChild(row); });
    });
  });
});

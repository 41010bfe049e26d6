// The page's experiments: every run of an `experiment` block a cell recorded
// (kept in the page's memory, so they outlive a cancelled worker), listed with
// their metrics, and any two compared with `compare`'s own report (computed by
// the wasm module, LANGUAGE §17.3).

/** The experiments section in `host`; `compare(a, b)` is the module's. */
export function experimentsView(host, compare) {
  const runs = [];
  const picked = [];

  function render() {
    host.replaceChildren();
    const head = document.createElement('h2');
    head.textContent = `Experiments (${runs.length})`;
    host.append(head);
    if (!runs.length) {
      const p = document.createElement('p');
      p.className = 'muted';
      p.textContent = 'Runs of experiment "name" { … } blocks appear here, with their *_metric values; tick two to compare them.';
      host.append(p);
      return;
    }
    const keys = [...new Set(runs.flatMap((r) => Object.keys(r.metrics)))].sort();
    const table = document.createElement('table');
    table.className = 'experiments';
    const tr = (cells, tag = 'td') => {
      const row = document.createElement('tr');
      for (const c of cells) {
        const cell = document.createElement(tag);
        if (c instanceof Node) cell.append(c);
        else cell.textContent = c;
        row.append(cell);
      }
      return row;
    };
    table.append(tr(['', '#', 'name', 'time', ...keys], 'th'));
    runs.forEach((r, i) => {
      const box = document.createElement('input');
      box.type = 'checkbox';
      box.className = 'pick';
      box.checked = picked.includes(i);
      box.onchange = () => {
        const at = picked.indexOf(i);
        if (at >= 0) picked.splice(at, 1);
        else picked.push(i);
        while (picked.length > 2) picked.shift();
        render();
      };
      const time = new Date(r.timestamp_ns / 1e6).toLocaleTimeString();
      table.append(tr([box, String(i + 1), r.name, time, ...keys.map((k) => (k in r.metrics ? String(r.metrics[k]) : '-'))]));
    });
    host.append(table);
    if (picked.length === 2) {
      const [a, b] = picked.map((i) => runs[i]);
      const out = compare(a, b);
      const pre = document.createElement('pre');
      pre.className = 'compare';
      pre.textContent = out.report ?? out.error;
      host.append(pre);
    }
  }

  render();
  return {
    /** Adds the records one run reported. */
    add(records) {
      if (!records || !records.length) return;
      runs.push(...records);
      render();
    },
  };
}

// The language server's Markdown (hovers, completion docs) as DOM nodes: the
// few forms it writes (```mlpl fences, `---` rules, `- ` lists, `| … |`
// tables, **bold**, `code`, line breaks), every piece of text set as text, never parsed as HTML, so names
// from the document cannot inject markup.

/** Appends the inline forms of one line (`code`, **bold**) to `parent`. */
function inline(parent, line) {
  const re = /(`[^`]+`|\*\*[^*]+\*\*)/g;
  let last = 0;
  for (const m of line.matchAll(re)) {
    if (m.index > last) parent.append(line.slice(last, m.index));
    const tok = m[0];
    if (tok.startsWith('`')) {
      const code = document.createElement('code');
      code.textContent = tok.slice(1, -1);
      parent.append(code);
    } else {
      const strong = document.createElement('strong');
      inline(strong, tok.slice(2, -2));
      parent.append(strong);
    }
    last = m.index + tok.length;
  }
  if (last < line.length) parent.append(line.slice(last));
}

/** A `div` holding `md` rendered. */
export function renderMarkdown(md) {
  const root = document.createElement('div');
  root.className = 'md';
  const lines = md.split('\n');
  let para = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith('```')) {
      const code = [];
      for (i++; i < lines.length && !lines[i].startsWith('```'); i++) code.push(lines[i]);
      const pre = document.createElement('pre');
      pre.textContent = code.join('\n');
      root.append(pre);
      para = null;
    } else if (line.startsWith('|')) {
      const table = document.createElement('table');
      for (; i < lines.length && lines[i].startsWith('|'); i++) {
        if (/^\|[-:| ]+\|$/.test(lines[i])) continue;
        const tr = document.createElement('tr');
        for (const cell of lines[i].slice(1, -1).split('|')) {
          const td = document.createElement(table.rows.length ? 'td' : 'th');
          inline(td, cell.trim());
          tr.append(td);
        }
        table.append(tr);
      }
      i--;
      root.append(table);
      para = null;
    } else if (line.startsWith('- ')) {
      let list = root.lastElementChild;
      if (!list || list.tagName !== 'UL' || para !== list) {
        list = document.createElement('ul');
        root.append(list);
        para = list;
      }
      const li = document.createElement('li');
      inline(li, line.slice(2));
      list.append(li);
    } else if (line.trim() === '---') {
      root.append(document.createElement('hr'));
      para = null;
    } else if (line.trim() === '') {
      para = null;
    } else {
      if (!para || para.tagName === 'UL') {
        para = document.createElement('p');
        root.append(para);
      } else {
        para.append(document.createElement('br'));
      }
      inline(para, line.replace(/ {2}$/, ''));
    }
  }
  return root;
}

/**
 * Cells of an MLPL document (LANGUAGE §21.1), computed from its lines: a cell
 * starts at each `# %%` marker line and runs to the next marker or the end. Text
 * before the first marker is cell 0 only if it holds code (not just blank lines and
 * comments). Marker lines inside a string literal are text, not markers. This is
 * the client-side twin of the runtime's splitter, used where no code lens
 * arguments are at hand (keyboard shortcuts, Run Above from the cursor).
 */

/** One cell: 0-based, end-exclusive line range (the marker line included). */
export interface CellRange {
  index: number;
  /** The marker's title (rest of the marker line, trimmed), empty without a marker. */
  title: string;
  startLine: number;
  /** First line after the cell. */
  endLine: number;
}

/** Splits text into lines on LF, CR LF and CR (as the runtime counts them). */
export function splitLines(text: string): string[] {
  return text.split(/\r\n|\r|\n/);
}

/** Whether a line has code outside comments, and whether it leaves a string open. */
function scanLine(line: string, inString: boolean): { code: boolean; inString: boolean } {
  let code = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (inString) {
      code = true;
      if (c === "\\") {
        i++;
      } else if (c === '"') {
        inString = false;
      }
    } else if (c === "#") {
      break;
    } else if (c === '"') {
      inString = true;
      code = true;
    } else if (c !== " " && c !== "\t") {
      code = true;
    }
  }
  return { code, inString };
}

/** The cells of a document text. Always at least one cell. */
export function cellRanges(text: string): CellRange[] {
  const lines = splitLines(text);
  const markers: { line: number; title: string }[] = [];
  let preambleCode = false;
  let inString = false;
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n];
    if (!inString && line.startsWith("# %%")) {
      markers.push({ line: n, title: line.slice(4).trim() });
      continue;
    }
    const scan = scanLine(line, inString);
    inString = scan.inString;
    if (markers.length === 0 && scan.code) {
      preambleCode = true;
    }
  }
  if (markers.length === 0) {
    return [{ index: 0, title: "", startLine: 0, endLine: lines.length }];
  }
  const cells: CellRange[] = [];
  if (preambleCode) {
    cells.push({ index: 0, title: "", startLine: 0, endLine: markers[0].line });
  }
  markers.forEach((m, k) => {
    const end = k + 1 < markers.length ? markers[k + 1].line : lines.length;
    cells.push({ index: cells.length, title: m.title, startLine: m.line, endLine: end });
  });
  return cells;
}

/**
 * The cell containing a 0-based line. A line in an ignored preamble (comments
 * before the first marker) belongs to the first cell.
 */
export function cellAtLine(cells: CellRange[], line: number): CellRange {
  for (const c of cells) {
    if (line < c.endLine) {
      return c;
    }
  }
  return cells[cells.length - 1];
}

/** The text of a cell (its lines joined with `\n`). */
export function cellText(text: string, cell: CellRange): string {
  return splitLines(text).slice(cell.startLine, cell.endLine).join("\n");
}

/** The cells to run for "Run Above" (every cell before `index`) and "Run All". */
export function cellsAbove(cells: CellRange[], index: number): CellRange[] {
  return cells.filter((c) => c.index < index);
}

/** The line where the cursor goes after "run cell and advance": the next cell's
 * first line after its marker, or undefined if this is the last cell. */
export function nextCellLine(cells: CellRange[], index: number): number | undefined {
  const next = cells.find((c) => c.index === index + 1);
  if (!next) {
    return undefined;
  }
  return next.endLine - next.startLine > 1 ? next.startLine + 1 : next.startLine;
}

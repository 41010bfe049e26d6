import { describe, expect, it } from "vitest";
import { cellAtLine, cellRanges, cellText, cellsAbove, nextCellLine } from "../src/core/cells";

describe("cellRanges", () => {
  it("is one cell without markers, even for an empty text", () => {
    expect(cellRanges("x = 1\ny = 2")).toEqual([{ index: 0, title: "", startLine: 0, endLine: 2 }]);
    expect(cellRanges("")).toEqual([{ index: 0, title: "", startLine: 0, endLine: 1 }]);
  });

  it("starts a cell at each marker, marker line included, titles trimmed", () => {
    const text = "# %% A\nx = 1\n# %%   B  \ny = 2\n";
    expect(cellRanges(text)).toEqual([
      { index: 0, title: "A", startLine: 0, endLine: 2 },
      { index: 1, title: "B", startLine: 2, endLine: 5 },
    ]);
  });

  it("makes code before the first marker cell 0, but not comments and blank lines", () => {
    expect(cellRanges("# header\n\n# %% A\nx = 1").map((c) => [c.index, c.startLine])).toEqual([[0, 2]]);
    expect(cellRanges("x = 1 # code\n# %% A\ny = 2").map((c) => [c.index, c.startLine, c.endLine])).toEqual([
      [0, 0, 1],
      [1, 1, 3],
    ]);
  });

  it("ignores a marker inside a multi-line string and `#` inside strings", () => {
    const text = 's = "line\n# %% not a marker\nend"\n# %% real\nx = "#"';
    const cells = cellRanges(text);
    expect(cells.map((c) => c.title)).toEqual(["", "real"]);
    expect(cells[0].endLine).toBe(3);
  });

  it("needs the marker at the start of the line", () => {
    expect(cellRanges("x = 1\n  # %% indented").length).toBe(1);
  });

  it("counts CR LF and lone CR as line breaks", () => {
    expect(cellRanges("# %% a\r\nx\r# %% b\ny").map((c) => c.startLine)).toEqual([0, 2]);
  });
});

describe("cell helpers", () => {
  const text = "# comment\n# %% A\na = 1\n\n# %% B\nb = 2\n# %% C\n";
  const cells = cellRanges(text);
  it("finds the cell of a line (preamble lines go to the first cell)", () => {
    expect(cellAtLine(cells, 0).index).toBe(0);
    expect(cellAtLine(cells, 3).index).toBe(0);
    expect(cellAtLine(cells, 5).index).toBe(1);
    expect(cellAtLine(cells, 99).index).toBe(2);
  });
  it("gives a cell's text with its marker", () => {
    expect(cellText(text, cells[1])).toBe("# %% B\nb = 2");
  });
  it("lists the cells above", () => {
    expect(cellsAbove(cells, 2).map((c) => c.title)).toEqual(["A", "B"]);
    expect(cellsAbove(cells, 0)).toEqual([]);
  });
  it("moves to the next cell's first line after its marker", () => {
    expect(nextCellLine(cells, 0)).toBe(5);
    expect(nextCellLine(cells, 2)).toBeUndefined();
  });
});

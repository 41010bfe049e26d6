/** What the Variables view lists and how it describes each binding. */

import type { Variable } from "../runner/client";

/** The variables listed at the top level, in the runner's order: not the names the
 * runtime generated (a model's parameter tensors, which the model's item lists as
 * children; marked `generated`, or named `__…` by older runners). */
export function shownVariables(vars: readonly Variable[]): Variable[] {
  return vars.filter((v) => !(v.generated ?? v.name.startsWith("__")));
}

/** `array · [batch=4, feat=3] · cpu · param`, `model · 4 parameter tensors`. */
export function describeVariable(v: Variable): string {
  const parts = [v.kind];
  if (v.named_shape) {
    parts.push(v.named_shape);
  } else if (v.kind === "model" && v.parameters) {
    parts.push(`${v.parameters.length} parameter tensors`);
  }
  if (v.device) {
    parts.push(v.device);
  }
  if (v.param) {
    parts.push(v.frozen ? "frozen" : "param");
  }
  return parts.join(" · ");
}

/** The Variables view: the session's bindings (name, kind, named shape, device), refreshed after each run. */

import * as vscode from "vscode";
import { describeVariable as describe, shownVariables as shown } from "./core/variables";
import type { Variable } from "./runner/client";
import type { RunnerController } from "./runnerController";

type Node = { variable: Variable } | { parameter: string };

const KIND_ICONS: Record<string, string> = {
  array: "symbol-array",
  string: "symbol-string",
  model: "symbol-class",
  tokenizer: "symbol-key",
};

/** The tree of variables; a model lists its parameter names as children. */
export class VariablesProvider implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly sub: vscode.Disposable;

  constructor(private readonly runner: RunnerController) {
    this.sub = runner.onDidChangeVariables(() => this.changed.fire(undefined));
  }

  getChildren(node?: Node): Node[] {
    if (!node) {
      return shown(this.runner.variables).map((variable) => ({ variable }));
    }
    if ("variable" in node && node.variable.parameters) {
      return node.variable.parameters.map((parameter) => ({ parameter }));
    }
    return [];
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if ("parameter" in node) {
      const item = new vscode.TreeItem(node.parameter, vscode.TreeItemCollapsibleState.None);
      item.iconPath = new vscode.ThemeIcon("symbol-field");
      return item;
    }
    const v = node.variable;
    const collapsible = v.parameters?.length ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None;
    const item = new vscode.TreeItem(v.name, collapsible);
    item.description = describe(v);
    item.tooltip = new vscode.MarkdownString(
      `**${v.name}** — ${v.kind}${v.named_shape ? ` \`${v.named_shape}\`` : ""}${v.device ? ` on ${v.device}` : ""}${v.param ? (v.frozen ? ", frozen parameter" : ", parameter") : ""}\n\n\`${v.preview}\``,
    );
    item.iconPath = new vscode.ThemeIcon(KIND_ICONS[v.kind] ?? "symbol-variable");
    item.contextValue = v.kind;
    return item;
  }

  /** Labels and descriptions of the top-level items (what the view shows). */
  items(): { label: string; description: string }[] {
    return shown(this.runner.variables).map((v) => ({ label: v.name, description: describe(v) }));
  }

  dispose(): void {
    this.sub.dispose();
    this.changed.dispose();
  }
}

// The JavaScript side of web/src/abi.rs: instantiates mlpl.wasm and wraps its
// string-in, JSON-out functions. Runs in Node, in a page and in a Web Worker.
//
//   const mlpl = await instantiate(bytes, { onStep(loop, step, total, loss, ms) {} });
//   mlpl.check(text)            -> { diagnostics: [...] }   (mlpl check)
//   mlpl.hover(text, offset)    -> { from, to, markdown } | null   (the language server's hover)
//   mlpl.complete(text, offset) -> { items: [{ label, type, detail, info, apply, snippet, from, to, sort }] }
//   mlpl.run(text)              -> { ok, value, svg, warnings, error, losses, experiments }
//   mlpl.runCell(text, line)    -> the same, in one workspace kept across calls
//   mlpl.compare(a, b)          -> { report } | { error }   (compare's report of two experiment records)
//   mlpl.reset()                   forgets that workspace
//
// Offsets are UTF-16 code units, as JavaScript strings count them.

export async function instantiate(source, { onStep } = {}) {
  const module = source instanceof WebAssembly.Module ? source : await WebAssembly.compile(source);
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let memory = null;
  let panic = null;
  const text = (ptr, len) => decoder.decode(new Uint8Array(memory.buffer, ptr, len));
  const env = {
    mlpl_now_ms: () => performance.now(),
    mlpl_unix_ms: () => Date.now(),
    mlpl_step: (loop, step, total, loss, ms) => onStep && onStep(loop, step, total, loss, ms),
    mlpl_panic: (ptr, len) => {
      panic = text(ptr, len);
    },
  };
  // Whatever else the module imports (C library functions the CORE-MATH sources
  // name on paths the build never takes) fails loudly if it is ever called.
  const imports = {};
  for (const imp of WebAssembly.Module.imports(module)) {
    imports[imp.module] ??= {};
    if (imp.module === 'env' && env[imp.name]) {
      imports.env[imp.name] = env[imp.name];
    } else if (imp.kind === 'function') {
      imports[imp.module][imp.name] = () => {
        throw new Error(`${imp.name} is not available in the browser build`);
      };
    }
  }
  const instance = await WebAssembly.instantiate(module, imports);
  const x = instance.exports;
  memory = x.memory;
  x.mlpl_init();

  function call(name, input, ...rest) {
    const bytes = encoder.encode(input);
    const ptr = x.mlpl_alloc(bytes.length);
    new Uint8Array(memory.buffer, ptr, bytes.length).set(bytes);
    panic = null;
    try {
      x[name](ptr, bytes.length, ...rest);
    } catch (e) {
      throw new Error(panic ? `internal error: ${panic}` : String(e));
    }
    return JSON.parse(text(x.mlpl_result_ptr(), x.mlpl_result_len()));
  }

  return {
    check: (src) => call('mlpl_check', src),
    hover: (src, offset) => call('mlpl_hover', src, offset),
    complete: (src, offset) => call('mlpl_complete', src, offset),
    compare: (a, b) => call('mlpl_compare', JSON.stringify({ a, b })),
    run: (src) => call('mlpl_run', src),
    runCell: (src, firstLine = 0) => call('mlpl_run_cell', src, firstLine),
    reset: () => x.mlpl_reset(),
  };
}

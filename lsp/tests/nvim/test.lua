-- Headless Neovim (0.7+) as an independent LSP client of mlpl-lsp:
-- open a file with a shape error, wait for the diagnostics, hover a variable,
-- and write what the client received to $MLPL_NVIM_OUT as JSON.
local bin = os.getenv("MLPL_LSP_BIN")
local file = os.getenv("MLPL_NVIM_FILE")
local out = os.getenv("MLPL_NVIM_OUT")

local function finish(result)
  local f = assert(io.open(out, "w"))
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd("qa!")
end

local ok, err = pcall(function()
  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  local client_id = vim.lsp.start_client({
    name = "mlpl-lsp",
    cmd = { bin },
    root_dir = vim.fn.fnamemodify(file, ":h"),
    init_options = { debounceMs = 0 },
  })
  assert(client_id, "could not start mlpl-lsp")
  vim.lsp.buf_attach_client(buf, client_id)

  local got = vim.wait(15000, function()
    return #vim.diagnostic.get(buf) > 0
  end, 50)
  local result = { diagnostics = {}, hover = nil, waited = got }
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local lsp = d.user_data and d.user_data.lsp or {}
    table.insert(result.diagnostics, {
      code = d.code or lsp.code,
      message = d.message,
      lnum = d.lnum,
      col = d.col,
      source = d.source,
      severity = d.severity,
    })
  end

  -- Hover over `X` in `H = matmul(X, W)` (line 3, 0-based; the X at column 11).
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = 3, character = 11 },
  }
  local responses = vim.lsp.buf_request_sync(buf, "textDocument/hover", params, 10000) or {}
  for _, r in pairs(responses) do
    if r.result and r.result.contents then
      local c = r.result.contents
      result.hover = type(c) == "table" and (c.value or vim.fn.json_encode(c)) or c
    end
  end
  vim.lsp.stop_client(client_id)
  finish(result)
end)
if not ok then
  finish({ error = tostring(err) })
end

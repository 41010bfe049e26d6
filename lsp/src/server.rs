//! The language server: documents, scheduling, configuration and the protocol
//! handlers (tower-lsp).
//!
//! - Each open document is a [`Document`] (a rope) behind its own lock; edits are
//!   applied in version order whatever order tower-lsp runs the handlers in.
//! - After an edit, the latest text is analysed once the debounce delay has passed
//!   without newer edits; a result is published only while its version is still
//!   the document's version, with that version, and never after a newer one.
//! - Requests use the analysis of the current version (computing it when the
//!   debounced one is not ready yet).
//! - Every analysis and every feature runs under `catch_unwind`: a panic is logged,
//!   shown to the user and the server keeps serving.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use serde_json::Value as Json;
use tower_lsp::jsonrpc::{Error as RpcError, Result};
use tower_lsp::lsp_types::*;
use tower_lsp::{Client, LanguageServer};

use crate::analysis::Analysis;
use crate::document::{Document, Offer};
use crate::feasibility::{self, Calibration, DeviceProfile};
use crate::features::{self, FeatureConfig};
use crate::measured::{DocMeasurements, Measurements, StepMeasured};
use crate::{actions, navigation};

/// Client settings (initialization options or `workspace/didChangeConfiguration`,
/// optionally under a `mlpl` key).
#[derive(Clone, Debug)]
pub struct Config {
    /// Show inferred shapes as inlay hints (`inlayHints.enable`, default true).
    pub inlay_hints: bool,
    /// Debounce delay after an edit, in milliseconds (`debounceMs`, default 30).
    pub debounce_ms: u64,
    /// How long a gap in document versions is waited for (`versionGapMs`, default 200).
    pub version_gap_ms: u64,
    /// Base URL of the diagnostic codes' documentation (`docsUrl`); each diagnostic
    /// links to `docsUrl#e0201`. Default (and for an empty `docsUrl`): the
    /// `docs/diagnostics.md` of the MLPL tree the server was built in or installed
    /// with, found by [`default_docs_url`]; without one, diagnostics carry no link
    /// and their explanation is in the hover and in `data.explain`.
    pub docs_url: Option<String>,
    /// The CUDA device estimates assume when none was calibrated
    /// (`estimates.cudaDevice`, an id or name from the known-device table).
    pub cuda_device: String,
    /// The Apple device estimates assume (`estimates.mlxDevice`).
    pub mlx_device: String,
    /// The calibration cache (`estimates.calibrationFile`; default: where
    /// `mlpl calibrate` writes it).
    pub calibration_file: Option<PathBuf>,
    /// Testing only: an analysis of a text containing this string panics
    /// (`testing.panicMarker`), to exercise panic isolation.
    pub panic_marker: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            inlay_hints: true,
            debounce_ms: 30,
            version_gap_ms: 200,
            docs_url: default_docs_url(),
            cuda_device: "a100-80gb".into(),
            mlx_device: "m2".into(),
            calibration_file: feasibility::default_cache_path(),
            panic_marker: None,
        }
    }
}

/// The `file:` URL of `docs/diagnostics.md` in the nearest directory above the
/// server's executable that has one (a checkout's `target/release/mlpl-lsp`, or
/// an install prefix with `share/mlpl/docs/diagnostics.md`).
pub fn default_docs_url() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors().skip(1).take(6).find_map(|dir| {
        ["docs/diagnostics.md", "share/mlpl/docs/diagnostics.md"]
            .iter()
            .map(|rel| dir.join(rel))
            .find(|p| p.is_file())
            .and_then(|p| Url::from_file_path(p).ok())
            .map(String::from)
    })
}

impl Config {
    /// Applies the settings present in `v` (unknown keys are ignored).
    pub fn update(&mut self, v: &Json) {
        let v = v.get("mlpl").unwrap_or(v);
        match v.get("inlayHints") {
            Some(Json::Bool(b)) => self.inlay_hints = *b,
            Some(o) => {
                if let Some(b) = o.get("enable").and_then(Json::as_bool) {
                    self.inlay_hints = b;
                }
            }
            None => {}
        }
        if let Some(n) = v.get("debounceMs").and_then(Json::as_u64) {
            self.debounce_ms = n.min(5000);
        }
        if let Some(n) = v.get("versionGapMs").and_then(Json::as_u64) {
            self.version_gap_ms = n.min(10_000);
        }
        if let Some(s) = v.get("docsUrl").and_then(Json::as_str) {
            self.docs_url = if s.is_empty() {
                default_docs_url()
            } else {
                Some(s.to_string())
            };
        }
        if let Some(e) = v.get("estimates") {
            if let Some(s) = e.get("cudaDevice").and_then(Json::as_str) {
                self.cuda_device = s.into();
            }
            if let Some(s) = e.get("mlxDevice").and_then(Json::as_str) {
                self.mlx_device = s.into();
            }
            if let Some(s) = e.get("calibrationFile").and_then(Json::as_str) {
                self.calibration_file = Some(PathBuf::from(s));
            }
        }
        if let Some(s) = v.pointer("/testing/panicMarker").and_then(Json::as_str) {
            self.panic_marker = (!s.is_empty()).then(|| s.to_string());
        }
    }
}

/// The analysis of one version, computed once however many tasks ask for it.
type Pending = Arc<tokio::sync::OnceCell<Option<Arc<Analysis>>>>;

struct DocEntry {
    doc: Document,
    analysis: Option<(i32, Arc<Analysis>)>,
    inflight: Option<(i32, Pending)>,
    published: Option<i32>,
    publish_lock: Arc<tokio::sync::Mutex<()>>,
}

struct Devices {
    profiles: Vec<DeviceProfile>,
    /// (path, modification time) of the calibration file they were read from.
    stamp: Option<(PathBuf, Option<SystemTime>)>,
}

/// The state shared by the handlers and the background tasks.
pub struct Inner {
    client: Client,
    docs: Mutex<HashMap<Url, Arc<Mutex<DocEntry>>>>,
    config: RwLock<Config>,
    devices: Mutex<Devices>,
    snippets: AtomicBool,
    /// Whether the client accepts `workspace/inlayHint/refresh` and `…/codeLens/refresh`.
    refresh: (AtomicBool, AtomicBool),
    /// What the runner measured of the documents' `train` loops (`mlpl/stepMeasured`).
    measured: Mutex<Measurements>,
}

/// The `mlpl-lsp` language server.
pub struct Server {
    inner: Arc<Inner>,
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

impl Server {
    /// A server talking to `client`.
    pub fn new(client: Client) -> Server {
        Server {
            inner: Arc::new(Inner {
                client,
                docs: Mutex::new(HashMap::new()),
                config: RwLock::new(Config::default()),
                devices: Mutex::new(Devices {
                    profiles: Vec::new(),
                    stamp: None,
                }),
                snippets: AtomicBool::new(false),
                refresh: (AtomicBool::new(false), AtomicBool::new(false)),
                measured: Mutex::new(Measurements::default()),
            }),
        }
    }
}

impl Inner {
    fn config(&self) -> Config {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn entry(&self, uri: &Url) -> Option<Arc<Mutex<DocEntry>>> {
        self.docs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uri)
            .cloned()
    }

    /// Runs `f`, turning a panic into a logged error and `None`.
    fn guard<T>(&self, what: &str, f: impl FnOnce() -> T) -> Option<T> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(v) => Some(v),
            Err(p) => {
                let msg = format!("mlpl-lsp: internal error in {what}: {}", panic_text(p));
                let client = self.client.clone();
                tokio::spawn(async move {
                    client.log_message(MessageType::ERROR, &msg).await;
                    client.show_message(MessageType::ERROR, &msg).await;
                });
                None
            }
        }
    }

    /// Analyses a text under `catch_unwind`.
    fn analyze(&self, text: &str) -> Option<Arc<Analysis>> {
        let marker = self.config().panic_marker;
        self.guard("analysis", move || {
            if let Some(m) = marker {
                if text.contains(&m) {
                    panic!("the test panic marker `{m}` is in the document");
                }
            }
            Arc::new(Analysis::new(text))
        })
    }

    /// The analysis of the current version of a document.
    async fn analysis(self: Arc<Self>, uri: &Url) -> Option<Arc<Analysis>> {
        let entry = self.entry(uri)?;
        let version = lock(&entry).doc.version();
        self.analysis_of(&entry, version).await
    }

    /// The analysis of `version` of a document, or `None` when the document is at
    /// another version (or the analysis panicked). Concurrent callers for the same
    /// version share one computation, which runs on a blocking thread.
    async fn analysis_of(
        self: Arc<Self>,
        entry: &Arc<Mutex<DocEntry>>,
        version: i32,
    ) -> Option<Arc<Analysis>> {
        let (cell, text) = {
            let mut e = lock(entry);
            if e.doc.version() != version {
                return None;
            }
            if let Some((v, a)) = &e.analysis {
                if *v == version {
                    return Some(a.clone());
                }
            }
            let cell = match &e.inflight {
                Some((v, c)) if *v == version => c.clone(),
                _ => {
                    let c: Pending = Arc::new(tokio::sync::OnceCell::new());
                    e.inflight = Some((version, c.clone()));
                    c
                }
            };
            (cell, e.doc.text())
        };
        let me = self.clone();
        let a = cell
            .get_or_init(|| async move {
                tokio::task::spawn_blocking(move || me.analyze(&text))
                    .await
                    .ok()
                    .flatten()
            })
            .await
            .clone();
        let mut e = lock(entry);
        if let Some(a) = &a {
            if e.doc.version() == version {
                e.analysis = Some((version, a.clone()));
            }
        }
        if e.inflight.as_ref().is_some_and(|(v, _)| *v == version) {
            e.inflight = None;
        }
        a
    }

    /// The devices of the estimates, reloading the calibration cache when it changed.
    fn devices(&self) -> Vec<DeviceProfile> {
        let cfg = self.config();
        let path = cfg.calibration_file.clone();
        let mtime = path
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .and_then(|m| m.modified().ok());
        let stamp = path.clone().map(|p| (p, mtime));
        let mut d = self.devices.lock().unwrap_or_else(|e| e.into_inner());
        if d.profiles.is_empty() || d.stamp != stamp {
            let cal = path.as_deref().and_then(Calibration::load);
            d.profiles = feasibility::profiles(
                cal.as_ref(),
                &cfg.cuda_device,
                &cfg.mlx_device,
                feasibility::host_memory(),
            );
            d.stamp = stamp;
        }
        d.profiles.clone()
    }

    /// A copy of a document's measurements, when it has any.
    fn measured(&self, uri: &Url) -> Option<DocMeasurements> {
        lock(&self.measured).of(uri).cloned()
    }

    fn invalidate_devices(&self) {
        self.devices
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .profiles
            .clear();
    }

    fn feature_config(&self) -> FeatureConfig {
        FeatureConfig {
            devices: self.devices(),
            snippets: self.snippets.load(Ordering::Relaxed),
        }
    }

    /// Analyses version `version` and publishes its diagnostics, unless the
    /// document has moved on (then a newer task publishes).
    async fn publish_if_current(self: Arc<Self>, uri: Url, version: i32) {
        let Some(entry) = self.entry(&uri) else {
            return;
        };
        let serial = lock(&entry).publish_lock.clone();
        let _serial = serial.lock().await;
        {
            let e = lock(&entry);
            if e.doc.version() != version || e.published.is_some_and(|p| p >= version) {
                return;
            }
        }
        let analysis = self.clone().analysis_of(&entry, version).await;
        let docs_url = self.config().docs_url;
        let diagnostics = {
            let mut e = lock(&entry);
            if e.doc.version() != version {
                return; // stale: never published
            }
            e.published = Some(version);
            match &analysis {
                Some(a) => {
                    let a = a.clone();
                    self.guard("diagnostics", || actions::diagnostics(&a, &uri, docs_url.as_deref()))
                        .unwrap_or_default()
                }
                None => vec![Diagnostic {
                    range: Range::default(),
                    severity: Some(DiagnosticSeverity::WARNING),
                    code: Some(NumberOrString::String("internal".into())),
                    source: Some("mlpl".into()),
                    message: "mlpl-lsp could not analyse this version of the document (internal error; see the server log)".into(),
                    ..Default::default()
                }],
            }
        };
        self.client
            .publish_diagnostics(uri, diagnostics, Some(version))
            .await;
    }

    fn schedule(self: &Arc<Self>, uri: Url, version: i32, delay_ms: u64) {
        let me = self.clone();
        tokio::spawn(async move {
            if delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            }
            me.publish_if_current(uri, version).await;
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Server {
    /// `mlpl/stepMeasured` (docs/language-server.md): the client forwards a
    /// runner's `step_measured` event with the document's URI; the loop's lens
    /// and hover show it while the loop is unchanged. Bad parameters are
    /// logged and ignored.
    pub async fn step_measured(&self, params: Json) {
        let m = match serde_json::from_value::<StepMeasured>(params) {
            Ok(m) => m,
            Err(e) => {
                self.inner
                    .client
                    .log_message(
                        MessageType::WARNING,
                        format!(
                            "{}: ignored: {e} (expected a `step_measured` event with `uri`)",
                            crate::measured::METHOD
                        ),
                    )
                    .await;
                return;
            }
        };
        let uri = m.uri.clone();
        let recorded = match self.inner.clone().analysis(&uri).await {
            Some(a) => self
                .inner
                .guard(crate::measured::METHOD, || {
                    lock(&self.inner.measured).record(&a, m)
                })
                .unwrap_or_else(|| Err("internal error".into())),
            None => Err("the document is not open".into()),
        };
        match recorded {
            Ok(()) => {
                if self.inner.refresh.1.load(Ordering::Relaxed) {
                    let _ = self.inner.client.code_lens_refresh().await;
                }
            }
            Err(why) => {
                self.inner
                    .client
                    .log_message(
                        MessageType::INFO,
                        format!("{}: {uri}: not shown: {why}", crate::measured::METHOD),
                    )
                    .await;
            }
        }
    }

    fn position_offset(a: &Analysis, p: Position) -> usize {
        a.lines.offset(&a.text, p)
    }

    async fn with_analysis<T>(
        &self,
        uri: &Url,
        what: &str,
        f: impl FnOnce(&Analysis) -> Option<T>,
    ) -> Option<T> {
        let a = self.inner.clone().analysis(uri).await?;
        self.inner.guard(what, || f(&a)).flatten()
    }
}

#[tower_lsp::async_trait]
impl LanguageServer for Server {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        if let Some(opts) = &params.initialization_options {
            self.inner
                .config
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .update(opts);
        }
        let snippets = params
            .capabilities
            .text_document
            .as_ref()
            .and_then(|t| t.completion.as_ref())
            .and_then(|c| c.completion_item.as_ref())
            .and_then(|i| i.snippet_support)
            .unwrap_or(false);
        self.inner.snippets.store(snippets, Ordering::Relaxed);
        let ws = params.capabilities.workspace.as_ref();
        let inlay_refresh = ws
            .and_then(|w| w.inlay_hint.as_ref())
            .and_then(|c| c.refresh_support)
            .unwrap_or(false);
        let lens_refresh = ws
            .and_then(|w| w.code_lens.as_ref())
            .and_then(|c| c.refresh_support)
            .unwrap_or(false);
        self.inner.refresh.0.store(inlay_refresh, Ordering::Relaxed);
        self.inner.refresh.1.store(lens_refresh, Ordering::Relaxed);
        Ok(InitializeResult {
            server_info: Some(ServerInfo {
                name: "mlpl-lsp".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            capabilities: ServerCapabilities {
                position_encoding: Some(PositionEncodingKind::UTF16),
                text_document_sync: Some(TextDocumentSyncCapability::Options(
                    TextDocumentSyncOptions {
                        open_close: Some(true),
                        change: Some(TextDocumentSyncKind::INCREMENTAL),
                        ..Default::default()
                    },
                )),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                completion_provider: Some(CompletionOptions {
                    trigger_characters: Some(vec!["\"".into(), "(".into(), "[".into(), ",".into()]),
                    resolve_provider: Some(true),
                    ..Default::default()
                }),
                signature_help_provider: Some(SignatureHelpOptions {
                    trigger_characters: Some(vec!["(".into(), ",".into()]),
                    retrigger_characters: None,
                    work_done_progress_options: Default::default(),
                }),
                definition_provider: Some(OneOf::Left(true)),
                references_provider: Some(OneOf::Left(true)),
                rename_provider: Some(OneOf::Right(RenameOptions {
                    prepare_provider: Some(true),
                    work_done_progress_options: Default::default(),
                })),
                document_symbol_provider: Some(OneOf::Left(true)),
                folding_range_provider: Some(FoldingRangeProviderCapability::Simple(true)),
                semantic_tokens_provider: Some(
                    SemanticTokensServerCapabilities::SemanticTokensOptions(
                        SemanticTokensOptions {
                            legend: navigation::legend(),
                            full: Some(SemanticTokensFullOptions::Bool(true)),
                            range: None,
                            work_done_progress_options: Default::default(),
                        },
                    ),
                ),
                inlay_hint_provider: Some(OneOf::Left(true)),
                code_action_provider: Some(CodeActionProviderCapability::Options(
                    CodeActionOptions {
                        code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                        ..Default::default()
                    },
                )),
                code_lens_provider: Some(CodeLensOptions {
                    resolve_provider: Some(false),
                }),
                ..Default::default()
            },
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        self.inner
            .client
            .log_message(
                MessageType::INFO,
                format!("mlpl-lsp {} ready", env!("CARGO_PKG_VERSION")),
            )
            .await;
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, p: DidOpenTextDocumentParams) {
        let uri = p.text_document.uri;
        let version = p.text_document.version;
        let entry = Arc::new(Mutex::new(DocEntry {
            doc: Document::new(&p.text_document.text, version),
            analysis: None,
            inflight: None,
            published: None,
            publish_lock: Arc::new(tokio::sync::Mutex::new(())),
        }));
        lock(&self.inner.docs).insert(uri.clone(), entry);
        self.inner.schedule(uri, version, 0);
    }

    async fn did_change(&self, p: DidChangeTextDocumentParams) {
        let uri = p.text_document.uri;
        let Some(entry) = self.inner.entry(&uri) else {
            return;
        };
        let version = p.text_document.version;
        let offer = self.inner.guard("didChange", || {
            lock(&entry).doc.offer(version, p.content_changes)
        });
        let cfg = self.inner.config();
        match offer {
            Some(Offer::Applied(v)) => self.inner.schedule(uri, v, cfg.debounce_ms),
            Some(Offer::Waiting) => {
                // Wait a little for the missing versions, then apply what is there.
                let me = self.inner.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(cfg.version_gap_ms)).await;
                    let v = {
                        let mut e = lock(&entry);
                        if !e.doc.has_pending() {
                            return;
                        }
                        e.doc.flush_pending();
                        e.doc.version()
                    };
                    me.client
                        .log_message(MessageType::WARNING, format!("{uri}: versions before {v} never arrived; applied the changes in version order"))
                        .await;
                    me.schedule(uri, v, 0);
                });
            }
            Some(Offer::Stale) => {
                self.inner
                    .client
                    .log_message(MessageType::WARNING, format!("{uri}: ignored a change to version {version}, which is not newer than the document"))
                    .await;
            }
            None => {}
        }
    }

    async fn did_close(&self, p: DidCloseTextDocumentParams) {
        let uri = p.text_document.uri;
        lock(&self.inner.docs).remove(&uri);
        lock(&self.inner.measured).forget(&uri);
        self.inner
            .client
            .publish_diagnostics(uri, Vec::new(), None)
            .await;
    }

    async fn did_change_configuration(&self, p: DidChangeConfigurationParams) {
        self.inner
            .config
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .update(&p.settings);
        self.inner.invalidate_devices();
        if self.inner.refresh.0.load(Ordering::Relaxed) {
            let _ = self.inner.client.inlay_hint_refresh().await;
        }
        if self.inner.refresh.1.load(Ordering::Relaxed) {
            let _ = self.inner.client.code_lens_refresh().await;
        }
    }

    async fn hover(&self, p: HoverParams) -> Result<Option<Hover>> {
        let pos = p.text_document_position_params;
        let cfg = self.inner.feature_config();
        let measured = self.inner.measured(&pos.text_document.uri);
        Ok(self
            .with_analysis(&pos.text_document.uri, "hover", |a| {
                features::hover_measured(
                    a,
                    Self::position_offset(a, pos.position),
                    &cfg,
                    measured.as_ref(),
                )
            })
            .await)
    }

    async fn completion(&self, p: CompletionParams) -> Result<Option<CompletionResponse>> {
        let pos = p.text_document_position;
        let cfg = self.inner.feature_config();
        Ok(self
            .with_analysis(&pos.text_document.uri, "completion", |a| {
                let items = features::completion(a, Self::position_offset(a, pos.position), &cfg);
                Some(CompletionResponse::List(CompletionList {
                    is_incomplete: true,
                    items,
                }))
            })
            .await)
    }

    async fn completion_resolve(&self, item: CompletionItem) -> Result<CompletionItem> {
        let fallback = item.clone();
        Ok(self
            .inner
            .guard("completionItem/resolve", || features::resolve(item))
            .unwrap_or(fallback))
    }

    async fn signature_help(&self, p: SignatureHelpParams) -> Result<Option<SignatureHelp>> {
        let pos = p.text_document_position_params;
        Ok(self
            .with_analysis(&pos.text_document.uri, "signatureHelp", |a| {
                features::signature_help(a, Self::position_offset(a, pos.position))
            })
            .await)
    }

    async fn goto_definition(
        &self,
        p: GotoDefinitionParams,
    ) -> Result<Option<GotoDefinitionResponse>> {
        let pos = p.text_document_position_params;
        let uri = pos.text_document.uri.clone();
        Ok(self
            .with_analysis(&uri, "definition", |a| {
                navigation::definition(a, &uri, Self::position_offset(a, pos.position))
                    .map(GotoDefinitionResponse::Scalar)
            })
            .await)
    }

    async fn references(&self, p: ReferenceParams) -> Result<Option<Vec<Location>>> {
        let pos = p.text_document_position;
        let uri = pos.text_document.uri.clone();
        Ok(self
            .with_analysis(&uri, "references", |a| {
                Some(navigation::references(
                    a,
                    &uri,
                    Self::position_offset(a, pos.position),
                    p.context.include_declaration,
                ))
            })
            .await)
    }

    async fn prepare_rename(
        &self,
        p: TextDocumentPositionParams,
    ) -> Result<Option<PrepareRenameResponse>> {
        Ok(self
            .with_analysis(&p.text_document.uri, "prepareRename", |a| {
                navigation::prepare_rename(a, Self::position_offset(a, p.position))
                    .map(PrepareRenameResponse::Range)
            })
            .await)
    }

    async fn rename(&self, p: RenameParams) -> Result<Option<WorkspaceEdit>> {
        let pos = p.text_document_position;
        let uri = pos.text_document.uri.clone();
        let r = self
            .with_analysis(&uri, "rename", |a| {
                Some(navigation::rename(
                    a,
                    &uri,
                    Self::position_offset(a, pos.position),
                    &p.new_name,
                ))
            })
            .await;
        match r {
            Some(Ok(edit)) => Ok(edit),
            Some(Err(why)) => Err(RpcError::invalid_params(why)),
            None => Ok(None),
        }
    }

    async fn document_symbol(
        &self,
        p: DocumentSymbolParams,
    ) -> Result<Option<DocumentSymbolResponse>> {
        Ok(self
            .with_analysis(&p.text_document.uri, "documentSymbol", |a| {
                Some(DocumentSymbolResponse::Nested(
                    navigation::document_symbols(a),
                ))
            })
            .await)
    }

    async fn folding_range(&self, p: FoldingRangeParams) -> Result<Option<Vec<FoldingRange>>> {
        Ok(self
            .with_analysis(&p.text_document.uri, "foldingRange", |a| {
                Some(navigation::folding_ranges(a))
            })
            .await)
    }

    async fn semantic_tokens_full(
        &self,
        p: SemanticTokensParams,
    ) -> Result<Option<SemanticTokensResult>> {
        Ok(self
            .with_analysis(&p.text_document.uri, "semanticTokens", |a| {
                Some(SemanticTokensResult::Tokens(SemanticTokens {
                    result_id: None,
                    data: navigation::semantic_tokens(a),
                }))
            })
            .await)
    }

    async fn inlay_hint(&self, p: InlayHintParams) -> Result<Option<Vec<InlayHint>>> {
        if !self.inner.config().inlay_hints {
            return Ok(Some(Vec::new()));
        }
        Ok(self
            .with_analysis(&p.text_document.uri, "inlayHint", |a| {
                Some(actions::inlay_hints(a, a.lines.span(&a.text, p.range)))
            })
            .await)
    }

    async fn code_action(&self, p: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = p.text_document.uri.clone();
        let docs_url = self.inner.config().docs_url;
        Ok(self
            .with_analysis(&uri, "codeAction", |a| {
                let actions = actions::code_actions(
                    a,
                    &uri,
                    a.lines.span(&a.text, p.range),
                    docs_url.as_deref(),
                );
                Some(
                    actions
                        .into_iter()
                        .map(CodeActionOrCommand::CodeAction)
                        .collect(),
                )
            })
            .await)
    }

    async fn code_lens(&self, p: CodeLensParams) -> Result<Option<Vec<CodeLens>>> {
        let uri = p.text_document.uri.clone();
        let devices = self.inner.devices();
        let measured = self.inner.measured(&uri);
        Ok(self
            .with_analysis(&uri, "codeLens", |a| {
                Some(actions::code_lenses_measured(
                    a,
                    &uri,
                    &devices,
                    measured.as_ref(),
                ))
            })
            .await)
    }
}

/// Serves LSP over standard input and output until the client exits.
pub async fn run_stdio() {
    crate::framing::serve(tokio::io::stdin(), tokio::io::stdout()).await;
}

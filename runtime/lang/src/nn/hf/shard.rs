//! The bytes of one `.safetensors` file of a checkpoint: memory-mapped, so a
//! load holds no copy of the file, only the pages the conversion is reading,
//! each tensor's pages given back once it is converted ([`ShardBytes::release`])
//! (read in full on wasm32, which has no memory maps and no files anyway).

use std::ops::Deref;
use std::path::Path;

use super::HfError;

/// A checkpoint file's bytes (see the module's documentation).
pub(super) struct ShardBytes {
    #[cfg(not(target_arch = "wasm32"))]
    map: memmap2::Mmap,
    #[cfg(target_arch = "wasm32")]
    bytes: Vec<u8>,
}

impl ShardBytes {
    /// Maps (or reads) the file at `path`.
    pub(super) fn open(path: &Path) -> Result<ShardBytes, HfError> {
        let io = |e: std::io::Error| HfError::Io(format!("{}: {e}", path.display()));
        #[cfg(not(target_arch = "wasm32"))]
        {
            let file = std::fs::File::open(path).map_err(io)?;
            // SAFETY: the map is read-only and lives as long as the load; a
            // checkpoint file truncated by another process meanwhile would
            // fault, which `transformers` and `candle` accept as well (they
            // map checkpoints the same way).
            let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io)?;
            Ok(ShardBytes { map })
        }
        #[cfg(target_arch = "wasm32")]
        {
            Ok(ShardBytes {
                bytes: std::fs::read(path).map_err(io)?,
            })
        }
    }
}

impl ShardBytes {
    /// Gives the pages of `bytes` back to the system if they lie in this
    /// file (the process's resident memory then holds the converted
    /// parameters, not the file too); reading them again reads the file.
    pub(super) fn release(&self, bytes: &[u8]) {
        let base = self.as_ptr() as usize;
        let start = bytes.as_ptr() as usize;
        if bytes.is_empty() || start < base || start + bytes.len() > base + self.len() {
            return;
        }
        #[cfg(unix)]
        {
            // SAFETY: the map is a read-only mapping of a file this process
            // does not write: dropped pages read back as the same bytes, so
            // the views into them stay valid. `madvise` rounds the range to
            // whole pages, which may take in a neighbour's page (same
            // argument). A failure only leaves the pages resident.
            let _ = unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start - base,
                    bytes.len(),
                )
            };
        }
    }
}

impl Deref for ShardBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        #[cfg(not(target_arch = "wasm32"))]
        return &self.map;
        #[cfg(target_arch = "wasm32")]
        return &self.bytes;
    }
}

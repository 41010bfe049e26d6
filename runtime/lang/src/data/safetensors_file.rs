//! A `.safetensors` file (a checkpoint or one of its shards, `save`'s
//! files), read a tensor at a time: its
//! header (each tensor's name, type, shape and byte range) when opened, a
//! tensor's values when asked, converted to f32 as they are read, a
//! megabyte (`CHUNK`) of the file at a time. A load so holds no copy of the file, not
//! even of one tensor's bytes, and a file cut short or rewritten while it
//! loads is an error ([`ReadError`]), not a crash (a memory map of it would
//! fault).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use safetensors::tensor::{Metadata, TensorInfo};

use super::files::extend_values;

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadError {
    /// The file could not be opened or read (E0405).
    Io(String),
    /// It is not a safetensors file, or its header does not fit its bytes (E0406).
    Malformed(String),
}

/// Bytes read from the file at a time (inside every x86-64 L2 cache, where
/// the conversion then reads them).
const CHUNK: usize = 1 << 20;

/// Largest header read (the `safetensors` crate's limit).
const MAX_HEADER: u64 = 100_000_000;

/// An open safetensors file (see the module's documentation).
pub struct SafetensorsFile {
    name: String,
    file: File,
    /// Where the tensors' bytes start: after the length and the header.
    data_start: u64,
}

impl SafetensorsFile {
    /// Opens `path` and reads its header: the file and its tensors, by name;
    /// errors name the file as `name`.
    pub fn open(
        path: &Path,
        name: &str,
    ) -> Result<(SafetensorsFile, Vec<(String, TensorInfo)>), ReadError> {
        let io = |e: std::io::Error| ReadError::Io(format!("{}: {e}", path.display()));
        let bad =
            |why: String| ReadError::Malformed(format!("{name} is not a safetensors file: {why}"));
        let mut file = File::open(path).map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let mut len = [0u8; 8];
        file.read_exact(&mut len)
            .map_err(|_| bad("shorter than its header's length".into()))?;
        let header_len = u64::from_le_bytes(len);
        if header_len > MAX_HEADER || 8 + header_len > file_len {
            return Err(bad(format!("a header of {header_len} bytes")));
        }
        let mut header = vec![0u8; header_len as usize];
        file.read_exact(&mut header).map_err(io)?;
        let meta: Metadata =
            serde_json::from_slice(&header).map_err(|e| bad(format!("its header: {e}")))?;
        let data_len = file_len - 8 - header_len;
        let mut tensors: Vec<(String, TensorInfo)> = meta
            .tensors()
            .into_iter()
            .map(|(k, info)| (k, info.clone()))
            .collect();
        tensors.sort_by(|a, b| a.0.cmp(&b.0));
        for (k, info) in &tensors {
            let (start, end) = info.data_offsets;
            let bytes = info
                .shape
                .iter()
                .try_fold(info.dtype.size(), |n, &d| n.checked_mul(d));
            if end as u64 > data_len {
                return Err(bad(format!(
                    "tensor `{k}` is at bytes {start}..{end} of the data, which ends at {data_len} (the file is cut short?)"
                )));
            }
            if end < start || bytes != Some(end - start) {
                return Err(bad(format!(
                    "tensor `{k}` has {} bytes ({start}..{end}), not those of its shape {:?} of {:?}",
                    end.saturating_sub(start),
                    info.shape,
                    info.dtype
                )));
            }
        }
        let opened = SafetensorsFile {
            name: name.to_string(),
            file,
            data_start: 8 + header_len,
        };
        Ok((opened, tensors))
    }

    /// The values of tensor `info` (one of this file's, of a type
    /// [`converts`](crate::data::files::converts) takes) as f32, into `out`
    /// (cleared first), read through `buf` a megabyte (`CHUNK`) at a time.
    pub fn read_values(
        &self,
        info: &TensorInfo,
        buf: &mut Vec<u8>,
        out: &mut Vec<f32>,
    ) -> Result<(), ReadError> {
        let (start, end) = info.data_offsets;
        let size = info.dtype.size();
        out.clear();
        out.reserve_exact((end - start) / size);
        buf.resize(CHUNK / size * size, 0);
        let io = |e: std::io::Error| {
            ReadError::Io(format!("{}: {e} (changed while it was read?)", self.name))
        };
        let mut file = &self.file;
        file.seek(SeekFrom::Start(self.data_start + start as u64))
            .map_err(io)?;
        let mut left = end - start;
        while left > 0 {
            let piece = &mut buf[..left.min(CHUNK / size * size)];
            file.read_exact(piece).map_err(io)?;
            extend_values(info.dtype, piece, out);
            left -= piece.len();
        }
        Ok(())
    }
}

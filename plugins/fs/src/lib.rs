//! The bundled `fs` plugin: every `fs/*` method (docs/protocol.md §9) as protocol mapping onto the
//! host's filesystem capability, which confines every path to the granted roots.

mod walk;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use wexec_guest::fs::{self, OpenMode};
use wexec_guest::path as uri;
use wexec_guest::{Call, Capability, Info, Plugin, Response, RpcError, respond};

/// Largest block read or written at once.
const MAX_BLOCK_BYTES: u64 = 1024 * 1024;

const METHODS: [&str; 13] = [
    "fs/readFile",
    "fs/writeFile",
    "fs/createDirectory",
    "fs/getMetadata",
    "fs/canonicalize",
    "fs/readDirectory",
    "fs/walk",
    "fs/remove",
    "fs/copy",
    "fs/open",
    "fs/readBlock",
    "fs/writeBlock",
    "fs/close",
];

struct Fs;

impl Plugin for Fs {
    fn info() -> Info {
        METHODS.iter().fold(
            Info::new("fs", env!("CARGO_PKG_VERSION")).capability(Capability::Filesystem),
            |info, method| info.method(*method),
        )
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        let result = match call.method() {
            // These build their results without a `Value` in between.
            "fs/readFile" => return read_file(&call),
            "fs/readBlock" => return read_block(&call),
            "fs/getMetadata" => return get_metadata(&call),
            "fs/readDirectory" => return read_directory(&call),
            "fs/writeFile" => write_file(&call),
            "fs/createDirectory" => create_directory(&call),
            "fs/canonicalize" => canonicalize(&call),
            "fs/walk" => walk(&call),
            "fs/remove" => remove(&call),
            "fs/copy" => copy(&call),
            "fs/open" => open(&call),
            "fs/writeBlock" => write_block(&call),
            "fs/close" => close(&call),
            other => Err(RpcError::method_not_found(other)),
        }?;
        Response::json(&result)
    }
}

/// A method's params, decoded straight from the text. A failure is described from a `Value`
/// (serde's text without a line and column: `` missing field `path` ``).
fn decode<T: DeserializeOwned>(call: &Call) -> Result<T, RpcError> {
    serde_json::from_str(call.raw_params()).or_else(|_| {
        serde_json::from_value(call.params::<Value>()?)
            .map_err(|err| RpcError::invalid_params(err.to_string()))
    })
}

fn yes() -> bool {
    true
}

/// Params with one path.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PathParams {
    path: String,
    #[serde(default = "yes")]
    follow_symlinks: bool,
}

impl PathParams {
    /// The path; the host validated and applies the request's `sandbox` (docs/protocol.md §7.3).
    fn native(&self) -> Result<String, RpcError> {
        uri::decode(&self.path)
    }
}

/// The contents go from the host to the client without passing through the plugin.
fn read_file(call: &Call) -> Result<Response, RpcError> {
    let params: PathParams = decode(call)?;
    let contents = fs::read_file_contents(&params.native()?, params.follow_symlinks)
        .map_err(RpcError::from)?;
    respond::early_base64(r#"{"dataBase64":"#, contents, "}")?;
    Ok(Response::sent())
}

fn write_file(call: &Call) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        #[serde(flatten)]
        target: PathParams,
        data_base64: String,
    }
    let params: Params = decode(call)?;
    let path = params.target.native()?;
    let data = STANDARD.decode(&params.data_base64).map_err(|err| {
        RpcError::invalid_request(format!(
            "fs/writeFile requires valid base64 dataBase64: {err}"
        ))
    })?;
    fs::write_file(&path, &data, params.target.follow_symlinks).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn create_directory(call: &Call) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    struct Params {
        #[serde(flatten)]
        target: PathParams,
        #[serde(default = "yes")]
        recursive: bool,
    }
    let params: Params = decode(call)?;
    fs::create_directory(&params.target.native()?, params.recursive).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn get_metadata(call: &Call) -> Result<Response, RpcError> {
    /// Serialized as is: no map of `Value`s built first.
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Metadata {
        is_directory: bool,
        is_file: bool,
        is_symlink: bool,
        size: u64,
        created_at_ms: u64,
        modified_at_ms: u64,
    }
    let params: PathParams = decode(call)?;
    let meta = fs::metadata(&params.native()?, params.follow_symlinks).map_err(RpcError::from)?;
    Response::json(&Metadata {
        is_directory: meta.is_directory,
        is_file: meta.is_file,
        is_symlink: meta.is_symlink,
        size: meta.size,
        created_at_ms: meta.created_at_ms,
        modified_at_ms: meta.modified_at_ms,
    })
}

fn canonicalize(call: &Call) -> Result<Value, RpcError> {
    let params: PathParams = decode(call)?;
    let canonical = fs::canonicalize(&params.native()?).map_err(RpcError::from)?;
    Ok(json!({"path": uri::encode(&canonical)}))
}

fn read_directory(call: &Call) -> Result<Response, RpcError> {
    let params: PathParams = decode(call)?;
    let entries = fs::read_directory(&params.native()?).map_err(|error| {
        // Too many entries is an internal limit here, not a bad request (docs/protocol.md §9.3).
        let too_large = error.kind == fs::ErrorKind::TooLarge;
        let mut mapped = RpcError::from(error);
        if too_large {
            mapped.code = -32603;
        }
        mapped
    })?;
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Entry {
        file_name: String,
        is_directory: bool,
        is_file: bool,
    }
    #[derive(Serialize)]
    struct Listing {
        entries: Vec<Entry>,
    }
    let entries = entries
        .into_iter()
        .filter(|entry| !entry.target_missing)
        .map(|entry| Entry {
            file_name: entry.name,
            is_directory: entry.is_directory,
            is_file: entry.is_file,
        })
        .collect();
    Response::json(&Listing { entries })
}

fn walk(call: &Call) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    struct Params {
        #[serde(flatten)]
        target: PathParams,
        options: walk::Options,
    }
    let params: Params = decode(call)?;
    walk::walk(&params.target.native()?, &params.options)
}

fn remove(call: &Call) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    struct Params {
        #[serde(flatten)]
        target: PathParams,
        #[serde(default = "yes")]
        recursive: bool,
        #[serde(default = "yes")]
        force: bool,
    }
    let params: Params = decode(call)?;
    fs::remove(&params.target.native()?, params.recursive, params.force).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn copy(call: &Call) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        source_path: String,
        destination_path: String,
        recursive: bool,
    }
    let params: Params = decode(call)?;
    let source = uri::decode(&params.source_path)?;
    let destination = uri::decode(&params.destination_path)?;
    fs::copy(&source, &destination, params.recursive).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn open(call: &Call) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        handle_id: String,
        #[serde(flatten)]
        target: PathParams,
        #[serde(default)]
        mode: Mode,
    }
    #[derive(Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    enum Mode {
        #[default]
        Read,
        Replace,
    }
    let params: Params = decode(call)?;
    let path = params.target.native()?;
    let mode = match params.mode {
        Mode::Read => OpenMode::Read,
        Mode::Replace => OpenMode::Replace,
    };
    fs::open(&params.handle_id, &path, mode).map_err(RpcError::from)?;
    Ok(json!({"handleId": params.handle_id}))
}

/// The block goes from the host to the client without passing through the plugin.
fn read_block(call: &Call) -> Result<Response, RpcError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        handle_id: String,
        offset: u64,
        len: u64,
    }
    let params: Params = decode(call)?;
    if !(1..=MAX_BLOCK_BYTES).contains(&params.len) {
        return Err(RpcError::invalid_request(format!(
            "file read block length must be between 1 and {MAX_BLOCK_BYTES}"
        )));
    }
    let len = u32::try_from(params.len).unwrap_or(u32::MAX);
    let data =
        fs::read_block_contents(&params.handle_id, params.offset, len).map_err(RpcError::from)?;
    let after = if data.len() < params.len {
        r#","eof":true}"#
    } else {
        r#","eof":false}"#
    };
    respond::early_base64(r#"{"chunk":"#, data, after)?;
    Ok(Response::sent())
}

fn write_block(call: &Call) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        handle_id: String,
        offset: u64,
        chunk: String,
    }
    let params: Params = decode(call)?;
    let data = STANDARD
        .decode(&params.chunk)
        .map_err(|err| RpcError::invalid_params(format!("chunk is not valid base64: {err}")))?;
    fs::write_block(&params.handle_id, params.offset, &data).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn close(call: &Call) -> Result<Value, RpcError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        handle_id: String,
    }
    let params: Params = decode(call)?;
    fs::close(&params.handle_id);
    Ok(json!({}))
}

wexec_guest::export_plugin!(Fs);

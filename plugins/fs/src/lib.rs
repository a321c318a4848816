//! The bundled `fs` plugin: every `fs/*` method (docs/protocol.md §9) as protocol mapping onto the
//! host's filesystem capability, which confines every path to the granted roots.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use wexec_guest::fs::{self, OpenMode};
use wexec_guest::path as uri;
use wexec_guest::protocol::limits::MAX_BLOCK_BYTES;
use wexec_guest::protocol::rpc;
use wexec_guest::protocol::{
    FS_CANONICALIZE, FS_CLOSE, FS_COPY, FS_CREATE_DIRECTORY, FS_GET_METADATA, FS_OPEN,
    FS_READ_BLOCK, FS_READ_DIRECTORY, FS_READ_FILE, FS_REMOVE, FS_WALK, FS_WATCH_MISSING,
    FS_WRITE_BLOCK, FS_WRITE_FILE, FsCanonicalizeResponse, FsCopyParams, FsCreateDirectoryParams,
    FsDirectoryEntry, FsHandleParams, FsMetadata, FsOpenMode, FsOpenParams, FsPathParams,
    FsReadBlockParams, FsReadDirectoryResponse, FsRemoveParams, FsWalkParams, FsWatchMissingParams,
    FsWatchMissingResponse, FsWriteBlockParams, FsWriteFileParams, METHODS,
};
use wexec_guest::{Call, Capability, Info, Plugin, Response, RpcError, respond};

struct Fs;

impl Plugin for Fs {
    fn info() -> Info {
        // Every `fs/*` request method of the protocol.
        (METHODS.iter().filter(|method| method.starts_with("fs/"))).fold(
            Info::new("fs", env!("CARGO_PKG_VERSION")).capability(Capability::Filesystem),
            |info, method| info.method(*method),
        )
    }

    fn handle(call: Call) -> Result<Response, RpcError> {
        let result = match call.method() {
            // These build their results without a `Value` in between.
            FS_READ_FILE => return read_file(&call),
            FS_READ_BLOCK => return read_block(&call),
            FS_GET_METADATA => return get_metadata(&call),
            FS_READ_DIRECTORY => return read_directory(&call),
            FS_WALK => return walk(&call),
            FS_CANONICALIZE => return canonicalize(&call),
            FS_WRITE_FILE => write_file(&call),
            FS_CREATE_DIRECTORY => create_directory(&call),
            FS_REMOVE => remove(&call),
            FS_COPY => copy(&call),
            FS_OPEN => return open(&call),
            FS_WRITE_BLOCK => write_block(&call),
            FS_CLOSE => close(&call),
            FS_WATCH_MISSING => return watch_missing(&call),
            other => Err(RpcError::method_not_found(other)),
        }?;
        Response::json(&result)
    }
}

/// The usual mapping of a capability error (docs/protocol.md §9.2), but with `code` for
/// errors of `kind`, where a method answers that kind differently.
fn with_code_for(error: fs::Error, kind: fs::ErrorKind, code: i64) -> RpcError {
    let special = error.kind == kind;
    let mut mapped = RpcError::from(error);
    if special {
        mapped.code = code;
    }
    mapped
}

/// The native path of a request path; the host validated and applies the request's `sandbox`
/// (docs/protocol.md §7.3).
fn native(path: &str) -> Result<String, RpcError> {
    uri::decode(path)
}

/// The contents go from the host to the client without passing through the plugin.
fn read_file(call: &Call) -> Result<Response, RpcError> {
    let params: FsPathParams = call.params()?;
    let follow = params.follow_symlinks.unwrap_or(true);
    let contents =
        fs::read_file_contents(&native(&params.path)?, follow).map_err(RpcError::from)?;
    respond::early_base64(r#"{"dataBase64":"#, contents, "}")?;
    Ok(Response::sent())
}

fn write_file(call: &Call) -> Result<Value, RpcError> {
    let params: FsWriteFileParams = call.params()?;
    let path = native(&params.path)?;
    let data = STANDARD.decode(&params.data_base64).map_err(|err| {
        RpcError::invalid_request(format!(
            "fs/writeFile requires valid base64 dataBase64: {err}"
        ))
    })?;
    let follow = params.follow_symlinks.unwrap_or(true);
    fs::write_file(&path, &data, follow).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn create_directory(call: &Call) -> Result<Value, RpcError> {
    let params: FsCreateDirectoryParams = call.params()?;
    let recursive = params.recursive.unwrap_or(true);
    let path = native(&params.path)?;
    if params.follow_symlinks == Some(false) {
        // No symlink anywhere in the path: the host's no-follow lookup finds one before the
        // last component (`ENOTDIR`); one as the last component fails as `mkdir` through
        // `O_NOFOLLOW` does in Codex's server. The check is not a confinement: the roots are.
        match fs::metadata(&path, false) {
            Ok(_) => {}
            Err(error) if error.kind == fs::ErrorKind::NotFound => {}
            // The last component is a symlink (any other invalid path keeps its own error).
            Err(error)
                if error.kind == fs::ErrorKind::Invalid
                    && error.message == wexec_guest::protocol::CONTAINS_SYMLINK =>
            {
                return Err(RpcError::internal_error("Not a directory (os error 20)"));
            }
            Err(error) => return Err(error.into()),
        }
    }
    fs::create_directory(&path, recursive).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn get_metadata(call: &Call) -> Result<Response, RpcError> {
    let params: FsPathParams = call.params()?;
    let follow = params.follow_symlinks.unwrap_or(true);
    // Outside the roots is "not found" here, whether or not the path exists, so that clients
    // probing for markers above their workspace (Codex looks for `.git` in every parent) take
    // it as absent instead of failing; the text still says why (docs/protocol.md §9.1).
    let meta = fs::metadata(&native(&params.path)?, follow)
        .map_err(|error| with_code_for(error, fs::ErrorKind::OutsideRoots, rpc::NOT_FOUND))?;
    Response::json(&FsMetadata {
        is_directory: meta.is_directory,
        is_file: meta.is_file,
        is_symlink: meta.is_symlink,
        size: meta.size,
        created_at_ms: meta.created_at_ms,
        modified_at_ms: meta.modified_at_ms,
    })
}

fn canonicalize(call: &Call) -> Result<Response, RpcError> {
    let params: FsPathParams = call.params()?;
    let canonical = fs::canonicalize(&native(&params.path)?).map_err(RpcError::from)?;
    Response::json(&FsCanonicalizeResponse {
        path: uri::encode(&canonical),
    })
}

fn read_directory(call: &Call) -> Result<Response, RpcError> {
    let params: FsPathParams = call.params()?;
    // Too many entries is an internal limit here, not a bad request (docs/protocol.md §9.3).
    let entries = fs::read_directory(&native(&params.path)?)
        .map_err(|error| with_code_for(error, fs::ErrorKind::TooLarge, rpc::INTERNAL_ERROR))?;
    let entries = entries
        .into_iter()
        .filter(|entry| !entry.target_missing)
        .map(|entry| FsDirectoryEntry {
            file_name: entry.name,
            is_directory: entry.is_directory,
            is_file: entry.is_file,
        })
        .collect();
    Response::json(&FsReadDirectoryResponse { entries })
}

fn walk(call: &Call) -> Result<Response, RpcError> {
    let params: FsWalkParams = call.params()?;
    Response::json(&wexec_guest::walk::walk(
        &native(&params.path)?,
        &params.options,
    )?)
}

fn remove(call: &Call) -> Result<Value, RpcError> {
    let params: FsRemoveParams = call.params()?;
    let (recursive, force) = (
        params.recursive.unwrap_or(true),
        params.force.unwrap_or(true),
    );
    let path = native(&params.path)?;
    if params.follow_symlinks == Some(false) {
        // Codex's server: no recursive removal without following, and no symlink anywhere
        // in the path (the host's no-follow lookup refuses one).
        if recursive {
            return Err(RpcError::internal_error(
                "recursive no-follow removal is unsupported",
            ));
        }
        match fs::metadata(&path, false) {
            Ok(_) => {}
            Err(error) if error.kind == fs::ErrorKind::NotFound && force => {
                return Ok(json!({}));
            }
            Err(error) => return Err(error.into()),
        }
    }
    fs::remove(&path, recursive, force).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn copy(call: &Call) -> Result<Value, RpcError> {
    let params: FsCopyParams = call.params()?;
    let source = native(&params.source_path)?;
    let destination = native(&params.destination_path)?;
    fs::copy(&source, &destination, params.recursive).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn open(call: &Call) -> Result<Response, RpcError> {
    let params: FsOpenParams = call.params()?;
    let path = native(&params.path)?;
    let mode = match params.mode.unwrap_or(FsOpenMode::Read) {
        FsOpenMode::Read => OpenMode::Read,
        FsOpenMode::Replace => OpenMode::Replace,
    };
    fs::open(&params.handle_id, &path, mode).map_err(RpcError::from)?;
    Response::json(&FsHandleParams {
        handle_id: params.handle_id,
    })
}

/// The block goes from the host to the client without passing through the plugin.
fn read_block(call: &Call) -> Result<Response, RpcError> {
    let params: FsReadBlockParams = call.params()?;
    let max = MAX_BLOCK_BYTES as u64;
    if !(1..=max).contains(&params.len) {
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
    let params: FsWriteBlockParams = call.params()?;
    let data = STANDARD
        .decode(&params.chunk)
        .map_err(|err| RpcError::invalid_params(format!("chunk is not valid base64: {err}")))?;
    fs::write_block(&params.handle_id, params.offset, &data).map_err(RpcError::from)?;
    Ok(json!({}))
}

fn close(call: &Call) -> Result<Value, RpcError> {
    let params: FsHandleParams = call.params()?;
    fs::close(&params.handle_id);
    Ok(json!({}))
}

/// The host watches (inotify, inside the roots) and sends `fs/missingChanged` when it fires.
fn watch_missing(call: &Call) -> Result<Response, RpcError> {
    let params: FsWatchMissingParams = call.params()?;
    let reply = |watching| Response::json(&FsWatchMissingResponse { watching });
    let unwatchable = || reply(false);
    // A path of another machine is one nobody can watch here: `false`, as Codex answers.
    let mut missing = Vec::with_capacity(params.missing.len());
    for path in &params.missing {
        match native(path) {
            Ok(path) => missing.push(path),
            Err(error) if error.code == rpc::INVALID_REQUEST => return unwatchable(),
            Err(error) => return Err(error),
        }
    }
    let present = match params.present.as_deref().map(native) {
        Some(Err(error)) if error.code == rpc::INVALID_REQUEST => return unwatchable(),
        present => present.transpose()?,
    };
    let watching = fs::watch_missing(params.watch_id, &missing, present.as_deref())
        .map_err(RpcError::internal_error)?;
    reply(watching)
}

wexec_guest::export_plugin!(Fs);

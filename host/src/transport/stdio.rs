//! stdio: one UTF-8 JSON message per line (PROTOCOL §3.2). `\n` or `\r\n` ends a line; blank
//! lines are skipped; a line over 64 MiB ends the connection without a reply. Output is one
//! compact JSON message per line, flushed whenever the queue runs dry.

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Connection, INBOUND_QUEUE_MESSAGES, Outbound, OutboundMessage};
use crate::rpc::MAX_MESSAGE_BYTES;

/// The peer name used in error texts.
pub const PEER: &str = "wexec stdio";

/// Buffer size for both directions.
const IO_BUFFER_BYTES: usize = 64 * 1024;

/// Serves a connection over a reader and a writer (stdin and stdout in production, pipes in
/// tests). The returned task ends once every [`Outbound`] is dropped and the output is flushed.
pub fn connect<R, W>(reader: R, writer: W) -> (Connection, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (inbound_tx, inbound) = mpsc::channel(INBOUND_QUEUE_MESSAGES);
    let (outbound, outbound_rx) = Outbound::channel();
    tokio::spawn(read_lines(reader, inbound_tx));
    let writer = tokio::spawn(write_lines(writer, outbound_rx));
    let connection = Connection {
        peer: PEER.to_owned(),
        inbound,
        outbound,
        detachable: false,
    };
    (connection, writer)
}

async fn read_lines<R: AsyncRead + Unpin>(reader: R, inbound: mpsc::Sender<Vec<u8>>) {
    let mut reader = BufReader::with_capacity(IO_BUFFER_BYTES, reader);
    // The longest acceptable raw line: the message, `\r` and `\n`.
    let read_limit = (MAX_MESSAGE_BYTES + 2) as u64;
    loop {
        let mut line = Vec::new();
        match (&mut reader)
            .take(read_limit)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) => return,
            Ok(_) => {}
            Err(err) => {
                tracing::warn!("stdin read failed, closing the connection: {err}");
                return;
            }
        }
        let terminated = line.last() == Some(&b'\n');
        if terminated {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        if line.len() > MAX_MESSAGE_BYTES {
            tracing::warn!(
                "stdin line exceeds {MAX_MESSAGE_BYTES} bytes; closing the connection without reply"
            );
            return;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if inbound.send(line).await.is_err() {
            return;
        }
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(writer: W, mut queue: mpsc::Receiver<OutboundMessage>) {
    let mut writer = BufWriter::with_capacity(IO_BUFFER_BYTES, writer);
    while let Some(message) = queue.recv().await {
        let written = async {
            writer.write_all(message.text.as_bytes()).await?;
            writer.write_all(b"\n").await?;
            // Batch whatever is already queued into one flush; never hold a message back.
            if queue.is_empty() {
                writer.flush().await?;
            }
            std::io::Result::Ok(())
        };
        if let Err(err) = written.await {
            tracing::warn!("stdout write failed; further output is discarded: {err}");
            // Keep draining so senders never block on a dead stdout.
            while queue.recv().await.is_some() {}
            return;
        }
    }
    if let Err(err) = writer.flush().await {
        tracing::warn!("stdout flush failed: {err}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn lines_of(input: Vec<u8>) -> Vec<Vec<u8>> {
        let (mut client, server) = tokio::io::duplex(1024 * 1024);
        let (mut connection, _writer) = connect(server, tokio::io::sink());
        tokio::spawn(async move {
            client.write_all(&input).await.unwrap();
            client.shutdown().await.unwrap();
            // Keep the duplex open for reading until the server is done.
            std::future::pending::<()>().await;
        });
        let mut lines = Vec::new();
        while let Some(line) = connection.inbound.recv().await {
            lines.push(line);
        }
        lines
    }

    #[tokio::test]
    async fn splits_on_lf_and_crlf_and_skips_blank_lines() {
        let lines = lines_of(b"a\r\n\n  \r\n\tb\n\r\nc".to_vec()).await;
        assert_eq!(lines, vec![b"a".to_vec(), b"\tb".to_vec(), b"c".to_vec()]);
    }

    #[tokio::test]
    async fn exactly_the_limit_is_accepted_and_one_more_byte_closes() {
        let mut input = vec![b'x'; MAX_MESSAGE_BYTES];
        input.extend_from_slice(b"\r\nnext\n");
        input.extend(vec![b'y'; MAX_MESSAGE_BYTES + 1]);
        input.extend_from_slice(b"\nnever\n");
        let lines = lines_of(input).await;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), MAX_MESSAGE_BYTES);
        assert_eq!(lines[1], b"next");
    }

    #[tokio::test]
    async fn an_unterminated_oversized_line_closes() {
        let lines = lines_of(vec![b'z'; MAX_MESSAGE_BYTES + 1]).await;
        assert!(lines.is_empty());
    }

    #[tokio::test]
    async fn writes_one_message_per_line() {
        let (reader, _keep) = tokio::io::duplex(64);
        let (out_writer, mut out_reader) = tokio::io::duplex(1024);
        let (connection, writer) = connect(reader, out_writer);
        connection.outbound.send("{\"a\":1}".into()).await.unwrap();
        connection.outbound.send("{}".into()).await.unwrap();
        drop(connection);
        writer.await.unwrap();
        let mut text = String::new();
        out_reader.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "{\"a\":1}\n{}\n");
    }
}

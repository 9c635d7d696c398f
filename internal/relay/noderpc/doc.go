// Package noderpc carries corral.Trees and corral.Sessions calls over
// streams: Client is both on control, every call opening one stream to
// the sandbox node, and Serve answers them there with the node's own
// (node.Local). It works over any stream opener with net.Conn semantics:
// the relay's yamux streams (internal/relay) in production, loopback TCP
// in tests.
//
// # Protocol
//
// One call is one stream, closed at the end of the call. The client
// writes one header line, the server answers with one answer line:
//
//	client: {"m":"<method>","a":<arguments>}\n
//	server: {"r":<result>}\n                                 success (null for none)
//	        {"r":null,"e":{"code":"...","message":"..."}}\n  failure
//
// A failure's "r" is null unless the node returned a result with its
// error: an Apply's ECONFLICT comes with the paths that conflict, and both
// cross. Arguments and results are the corral types, encoded by
// encoding/json.
// A line is at most MaxLine bytes (16 MiB: enough for an 8 MiB WriteFile
// base64'd, or a manifest's diffs); a longer one is refused with
// ETOOLARGE, by the writer before sending it and by the reader, which
// never reads further. An unknown method is EINVALID.
//
// Some methods carry bytes beside their lines, as frames: a type byte, a
// 4-byte big-endian length and at most that many bytes of payload (32 KiB
// for data). A frame of type 'x' ends a run of frames; an answer line
// always follows it when it comes from the server.
//
//   - Import: after the header, the archive as 'd' frames then an 'x'
//     frame (the body's end); then the answer line. The server may answer
//     before the body's end (an archive it refuses early, or one whose
//     tar ends before its padding); it then reads and drops what the
//     client still sends until 'x' or the stream's end, and the client
//     stops sending once it has the answer. Frames rather than a
//     half-close: yamux streams have no CloseWrite (their Close is a
//     half-close, but net.Conn does not say so), and frames work the same
//     over both.
//   - Output: the command's output as 'd' frames, raw (it is the bulk of
//     what crosses: as JSON it would be base64'd and scanned twice, which
//     held a relayed read to a fifth of the speed), then 'x', then the
//     answer line with the exit.
//   - ImportWorkspace is sent as Import is, and ExportWorkspace answered
//     as Archive is: a workspace moving between nodes crosses control as
//     a tar, streamed, never whole in memory.
//   - Archive: the archive as 'd' frames, then 'x', then the answer line:
//     an error after bytes went out reaches the client as that error,
//     never as a short archive that looks whole.
//   - Clone: {"p":<percent>} lines, one per progress report, before the
//     answer line.
//   - Clone, Push and Sync with a credential: the header says its length
//     ("secret"). The server answers with a 'k' frame, an X25519 public
//     key it made for this call alone; the client seals the credential
//     to it (NaCl's anonymous box: an ephemeral key of its own, XSalsa20
//     and Poly1305) and sends that as one 's' frame. The server opens it
//     into a slice of its own, wipes its private key, and wipes the
//     credential once the call has returned. A server that refuses the
//     call first answers a line instead of the key, and the client sends
//     nothing.
//   - Terminal: after the answer line the stream is the terminal. Client
//     to server: 'd' frames (typed bytes), 'r' frames (resize: columns and
//     rows, 2 bytes each) and a 'c' frame (this viewer detaches: the shell
//     runs on). Server to client: 'd' frames (the screen), then 'x' and an
//     answer line when the shell is gone: null when it exited (Read then
//     returns io.EOF, as node.Local's does), an error otherwise (the
//     session ended: ECONFLICT). The server keeps reading until the client
//     closes.
//
// # Errors
//
// A *corral.Error crosses as its Code and Message only, never its Err
// (paths, internals): the client rebuilds &corral.Error{Code, Message},
// so corral.ErrorCode works across the relay (a Session of no session is
// ENOTFOUND on both sides). Any other error crosses as EINTERNAL "the
// sandbox node failed", and its text goes to the node's log only. A
// stream that breaks before the answer (EOF, a reset) is EUNAVAIL "the
// sandbox node is unreachable" on the client; an answer it cannot decode
// is EINTERNAL. A call whose ctx ends returns ctx.Err(), as node.Local's
// do.
//
// # Cancellation
//
// When the client's ctx ends, it closes the stream. The server learns of
// it by reading: once it has read a call's input (the header, and a body
// or credential), one goroutine per call reads on, and since a client
// sends nothing more, that read returns only when the stream ends (or on
// a byte the client had no business sending): it then cancels the call's
// ctx and unblocks the call's writes. A reader learns of the close at
// once, where polling with SetReadDeadline would learn of it a period
// late and wake every call each period. This is how "a browser went away"
// reaches the node: Output(wait=true), Archive and Clone stop there.
// Terminal's own input loop plays that part for terminals, whose open is
// not cancellable (node.Local's is immediate).
//
// # Backpressure
//
// Nothing reads ahead into a buffer that grows: each end reads a frame at
// a time through a fixed 64 KiB buffer and writes through a fixed 32 KiB
// one, with blocking writes, so a slow reader stops its writer after the
// stream's own flow control (a TCP socket's buffers, a yamux window) is
// full, and a node's Archive or a shell blocks there.
//
// # Secrets
//
// GitAuth.Secret (Clone, Push, Sync) crosses because the call needs it, and
// only sealed: what passes through the relay's buffers on either side
// (the WebSocket's reader, yamux's, a TLS connection's, this package's
// own) is a box that only the call's private key opens, and that key is
// wiped before the call runs. So nothing the node still holds after the
// call, not even the buffers that carried it, holds the credential: a
// test dumps a node's heap after a push and scans it. The credential
// never passes through encoding/json (whose pooled buffers would keep a
// copy), is never logged, and is never part of an error (the server takes
// it out of an error's text before logging or answering it).
package noderpc

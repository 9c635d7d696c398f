// A shell in a run's sandbox, in the page: xterm.js drawing what the
// server's WebSocket sends, and the keys typed sent back (terminal.ts has
// the protocol). It never reconnects by itself: a lost connection offers a
// button, so a server that refuses is not hammered.

import { useEffect, useRef, useState } from 'react'
import { Terminal as XTerm } from '@xterm/xterm'
import { FitAddon } from '@xterm/addon-fit'
import '@xterm/xterm/css/xterm.css'
import { closeReason, encodeBinary, encodeInput, resizeMessage, terminalURL, type Closed } from './terminal'

/** The part of a WebSocket the terminal uses; tests hand in a fake (jsdom has no server to talk to). */
export interface TerminalSocket {
  binaryType: BinaryType
  readonly readyState: number
  onopen: ((e: Event) => void) | null
  onmessage: ((e: MessageEvent) => void) | null
  onclose: ((e: CloseEvent) => void) | null
  send(data: string | Uint8Array<ArrayBuffer>): void
  close(code?: number): void
}

const OPEN = 1 // WebSocket.OPEN, spelled out so a fake socket class need not define it

function openSocket(url: string): TerminalSocket {
  return new WebSocket(url)
}

// xterm draws into its own elements and cannot read CSS variables: the
// stylesheet's --mono and the header's dark colours, spelled out.
const font = "ui-monospace, SFMono-Regular, Menlo, Consolas, 'Liberation Mono', monospace"
const theme = { background: '#1d232b', foreground: '#e8ecf1', cursor: '#e8ecf1' }

interface Props {
  runId: string
  /** Opens the socket. Must be stable across renders: a new function reconnects. */
  connect?: (url: string) => TerminalSocket
}

export function Terminal({ runId, connect = openSocket }: Props) {
  const screen = useRef<HTMLDivElement>(null)
  // Each Reconnect is a new attempt: a fresh xterm and socket, since the
  // server replays the screen so far to whoever joins.
  const [attempt, setAttempt] = useState(0)
  const [connected, setConnected] = useState(false)
  const [closed, setClosed] = useState<Closed>()

  useEffect(() => {
    const el = screen.current
    if (!el) return
    const term = new XTerm({ fontFamily: font, fontSize: 14, cursorBlink: true, theme })
    const fit = new FitAddon()
    term.loadAddon(fit)
    term.open(el)
    fit.fit()

    const socket = connect(terminalURL(runId))
    socket.binaryType = 'arraybuffer'
    // Set on close and on unmount: from then on nothing is sent or shown.
    let over = false
    const send = (data: string | Uint8Array<ArrayBuffer>) => {
      if (!over && socket.readyState === OPEN) socket.send(data)
    }
    const sendSize = () => {
      const m = resizeMessage(term.cols, term.rows)
      if (m) send(m)
    }

    socket.onopen = () => {
      if (over) return
      setConnected(true)
      fit.fit()
      // Always once on open, changed or not: the server's pty starts at its own size.
      sendSize()
      term.focus()
    }
    socket.onmessage = (e) => {
      if (over) return
      // Text frames are control messages; none from the server is defined yet, so they are skipped.
      if (e.data instanceof ArrayBuffer) term.write(new Uint8Array(e.data))
    }
    socket.onclose = (e) => {
      if (over) return
      over = true
      term.options.disableStdin = true
      setClosed(closeReason(e.code))
    }

    const subscriptions = [
      term.onData((d) => send(encodeInput(d))),
      term.onBinary((d) => send(encodeBinary(d))),
      term.onResize(sendSize),
    ]
    // The box follows the page's width; fit turns its size into columns and
    // rows, and onResize above tells the server.
    const observer = typeof ResizeObserver === 'undefined' ? undefined : new ResizeObserver(() => fit.fit())
    observer?.observe(el)

    return () => {
      over = true
      observer?.disconnect()
      for (const s of subscriptions) s.dispose()
      socket.onopen = null
      socket.onmessage = null
      socket.onclose = null
      socket.close(1000)
      term.dispose()
    }
  }, [runId, connect, attempt])

  function reconnect() {
    setClosed(undefined)
    setConnected(false)
    setAttempt((n) => n + 1)
  }

  return (
    <section className="terminal" aria-label="Terminal" data-testid="terminal">
      <div className="terminal-screen" ref={screen} />
      {closed ? (
        <div className="terminal-state">
          <p role={closed.problem ? 'alert' : 'status'} className={closed.problem ? 'error' : 'muted'}>
            {closed.text}
          </p>
          {closed.reconnect && (
            <button type="button" className="secondary" onClick={reconnect}>
              Reconnect
            </button>
          )}
        </div>
      ) : (
        !connected && <p className="muted terminal-state">Connecting to the terminal…</p>
      )}
    </section>
  )
}

// The terminal over a fake WebSocket the test drives. xterm.js cannot open
// under jsdom (it needs matchMedia and a canvas), so only the xterm modules
// are replaced: a stand-in that records what is written and lets the test
// "type" by firing the onData/onBinary handlers the component registered.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { act, fireEvent, render, screen, waitFor } from '@testing-library/react'
import { Terminal, type TerminalSocket } from './Terminal'
import { RunView } from './RunView'
import { canAt } from './testkit'
import type { Level, Run, RunStatus, User } from './types'

const fake = vi.hoisted(() => {
  type Handler<T> = (v: T) => void
  function emitter<T>() {
    const fns: Handler<T>[] = []
    return {
      on(fn: Handler<T>) {
        fns.push(fn)
        return { dispose: () => void fns.splice(fns.indexOf(fn), 1) }
      },
      fire: (v: T) => fns.slice().forEach((fn) => fn(v)),
      get count() {
        return fns.length
      },
    }
  }
  class FakeXTerm {
    static all: FakeXTerm[] = []
    cols = 80
    rows = 24
    options: Record<string, unknown> = {}
    written: Uint8Array[] = []
    parent?: HTMLElement
    disposed = false
    data = emitter<string>()
    binary = emitter<string>()
    resized = emitter<{ cols: number; rows: number }>()
    onData = this.data.on
    onBinary = this.binary.on
    onResize = this.resized.on
    constructor() {
      FakeXTerm.all.push(this)
    }
    loadAddon(addon: { activate(t: FakeXTerm): void }) {
      addon.activate(this)
    }
    open(el: HTMLElement) {
      this.parent = el
    }
    write(d: Uint8Array) {
      this.written.push(d)
    }
    focus() {}
    resize(cols: number, rows: number) {
      if (cols === this.cols && rows === this.rows) return
      this.cols = cols
      this.rows = rows
      this.resized.fire({ cols, rows })
    }
    dispose() {
      this.disposed = true
    }
    /** What typing does in xterm: onData with the characters. */
    type(s: string) {
      if (this.options.disableStdin) return
      this.data.fire(s)
    }
  }
  /** Fits to `box`, the size the test says the container has. */
  class FakeFit {
    static box = { cols: 100, rows: 30 }
    term?: FakeXTerm
    activate(t: FakeXTerm) {
      this.term = t
    }
    fit() {
      this.term?.resize(FakeFit.box.cols, FakeFit.box.rows)
    }
    proposeDimensions() {
      return FakeFit.box
    }
    dispose() {}
  }
  return { FakeXTerm, FakeFit }
})

vi.mock('@xterm/xterm', () => ({ Terminal: fake.FakeXTerm }))
vi.mock('@xterm/addon-fit', () => ({ FitAddon: fake.FakeFit }))

const { FakeXTerm, FakeFit } = fake

/** A WebSocket the test opens, feeds and closes; send before open throws, as a real one does. */
class FakeSocket implements TerminalSocket {
  static all: FakeSocket[] = []
  static get last(): FakeSocket {
    return FakeSocket.all[FakeSocket.all.length - 1]
  }
  binaryType: BinaryType = 'blob'
  readyState = 0
  onopen: ((e: Event) => void) | null = null
  onmessage: ((e: MessageEvent) => void) | null = null
  onclose: ((e: CloseEvent) => void) | null = null
  sent: (string | Uint8Array)[] = []
  closedWith?: number
  constructor(public url: string) {
    FakeSocket.all.push(this)
  }
  send(data: string | Uint8Array) {
    if (this.readyState !== 1) throw new Error('InvalidStateError: not open')
    this.sent.push(data)
  }
  close(code?: number) {
    if (this.readyState >= 2) return
    this.readyState = 3
    this.closedWith = code
  }
  // The server's side.
  open() {
    act(() => {
      this.readyState = 1
      this.onopen?.(new Event('open'))
    })
  }
  receive(data: string | ArrayBuffer) {
    act(() => this.onmessage?.(new MessageEvent('message', { data })))
  }
  serverClose(code: number) {
    act(() => {
      this.readyState = 3
      this.onclose?.(new CloseEvent('close', { code }))
    })
  }
  get texts(): string[] {
    return this.sent.filter((d): d is string => typeof d === 'string')
  }
  get bytes(): number[][] {
    return this.sent.filter((d): d is Uint8Array => typeof d !== 'string').map((d) => [...d])
  }
}

class FakeResizeObserver {
  static all: FakeResizeObserver[] = []
  observed: Element[] = []
  disconnected = false
  constructor(private cb: ResizeObserverCallback) {
    FakeResizeObserver.all.push(this)
  }
  observe(el: Element) {
    this.observed.push(el)
  }
  unobserve() {}
  disconnect() {
    this.disconnected = true
  }
  fire() {
    act(() => this.cb([], this as unknown as ResizeObserver))
  }
}

const connect = (url: string) => new FakeSocket(url)
const lastTerm = () => FakeXTerm.all[FakeXTerm.all.length - 1]

beforeEach(() => {
  FakeSocket.all = []
  FakeXTerm.all = []
  FakeResizeObserver.all = []
  FakeFit.box = { cols: 100, rows: 30 }
  vi.stubGlobal('ResizeObserver', FakeResizeObserver)
})

afterEach(() => vi.unstubAllGlobals())

describe('Terminal', () => {
  it('opens the run’s socket and mounts xterm in its labelled container', () => {
    render(<Terminal runId="run_1" connect={connect} />)
    const box = screen.getByTestId('terminal')
    expect(screen.getByRole('region', { name: 'Terminal' })).toBe(box)
    expect(FakeSocket.all).toHaveLength(1)
    expect(FakeSocket.last.url).toBe(`ws://${window.location.host}/api/runs/run_1/terminal`)
    expect(FakeSocket.last.binaryType).toBe('arraybuffer')
    expect(box.contains(lastTerm().parent!)).toBe(true)
    expect(screen.getByText('Connecting to the terminal…')).toBeTruthy()
  })

  it('sends the size once open, and nothing before', () => {
    render(<Terminal runId="run_1" connect={connect} />)
    const s = FakeSocket.last
    expect(s.sent).toEqual([]) // fit ran at mount, but the socket was not open yet
    s.open()
    expect(s.texts).toEqual(['{"type":"resize","cols":100,"rows":30}'])
    expect(screen.queryByText('Connecting to the terminal…')).toBeNull()
  })

  it('sends the size again when the box is resized, and not when it is not', () => {
    render(<Terminal runId="run_1" connect={connect} />)
    const s = FakeSocket.last
    s.open()
    const observer = FakeResizeObserver.all[0]
    expect(observer.observed).toEqual([lastTerm().parent])
    FakeFit.box = { cols: 132, rows: 40 }
    observer.fire()
    observer.fire() // same size: nothing new
    expect(s.texts).toEqual(['{"type":"resize","cols":100,"rows":30}', '{"type":"resize","cols":132,"rows":40}'])
  })

  it('sends keystrokes as binary frames, UTF-8 for typing and byte for byte for binary', () => {
    render(<Terminal runId="run_1" connect={connect} />)
    const s = FakeSocket.last
    s.open()
    act(() => {
      lastTerm().type('ls é\r')
      lastTerm().binary.fire('\x1b[M\xa1')
    })
    expect(s.bytes).toEqual([
      [0x6c, 0x73, 0x20, 0xc3, 0xa9, 0x0d],
      [0x1b, 0x5b, 0x4d, 0xa1],
    ])
    // Bytes, not a string: a string would go as a text frame, read as a control message.
    expect(s.sent.slice(1).every((d) => ArrayBuffer.isView(d))).toBe(true)
  })

  it('writes binary frames to the screen, the screen so far first', () => {
    render(<Terminal runId="run_1" connect={connect} />)
    const s = FakeSocket.last
    s.open()
    s.receive(new Uint8Array([0x24, 0x20]).buffer) // the prompt a late joiner is shown
    s.receive('{"type":"something-new"}') // a control message the browser does not know: skipped
    s.receive(new Uint8Array([0x68, 0x69]).buffer)
    expect(lastTerm().written.map((d) => [...d])).toEqual([
      [0x24, 0x20],
      [0x68, 0x69],
    ])
  })

  it('shows a revoked access, offers no Reconnect and sends nothing more', () => {
    render(<Terminal runId="run_1" connect={connect} />)
    const s = FakeSocket.last
    s.open()
    s.serverClose(4403)
    expect(screen.getByRole('alert').textContent).toBe('You no longer have access to this terminal.')
    expect(screen.queryByRole('button', { name: 'Reconnect' })).toBeNull()
    act(() => lastTerm().data.fire('x'))
    expect(s.bytes).toEqual([])
    expect(FakeSocket.all).toHaveLength(1)
  })

  describe('says why it closed', () => {
    const cases: { code: number; role: 'alert' | 'status'; text: string; reconnect: boolean }[] = [
      { code: 4404, role: 'status', text: 'The run has ended.', reconnect: false },
      { code: 1000, role: 'status', text: 'The shell exited.', reconnect: false },
      { code: 1006, role: 'alert', text: 'The connection to the terminal was lost.', reconnect: true },
    ]
    for (const c of cases) {
      it(`on close code ${c.code}`, () => {
        render(<Terminal runId="run_1" connect={connect} />)
        FakeSocket.last.open()
        FakeSocket.last.serverClose(c.code)
        expect(screen.getByRole(c.role).textContent).toBe(c.text)
        expect(screen.queryAllByRole('button', { name: 'Reconnect' })).toHaveLength(c.reconnect ? 1 : 0)
        expect(FakeSocket.all).toHaveLength(1)
      })
    }
  })

  it('reconnects once per click, never by itself, with a fresh screen', () => {
    render(<Terminal runId="run_1" connect={connect} />)
    const first = FakeSocket.last
    const firstTerm = lastTerm()
    first.serverClose(1006) // never opened: the upgrade failed
    expect(FakeSocket.all).toHaveLength(1)
    fireEvent.click(screen.getByRole('button', { name: 'Reconnect' }))
    expect(FakeSocket.all).toHaveLength(2)
    expect(firstTerm.disposed).toBe(true)
    expect(FakeXTerm.all).toHaveLength(2)
    expect(screen.queryByRole('alert')).toBeNull()
    const second = FakeSocket.last
    second.open()
    expect(second.texts).toEqual(['{"type":"resize","cols":100,"rows":30}'])
    second.serverClose(1006)
    expect(FakeSocket.all).toHaveLength(2)
    expect(screen.getByRole('button', { name: 'Reconnect' })).toBeTruthy()
  })

  it('closes the socket and disposes xterm on unmount', () => {
    const { unmount } = render(<Terminal runId="run_1" connect={connect} />)
    const s = FakeSocket.last
    const term = lastTerm()
    s.open()
    unmount()
    expect(s.readyState).toBe(3)
    expect(s.closedWith).toBe(1000)
    expect(term.disposed).toBe(true)
    expect(term.data.count + term.binary.count + term.resized.count).toBe(0)
    expect(FakeResizeObserver.all[0].disconnected).toBe(true)
  })
})

// The run view offers the button; its terminal uses the browser's WebSocket (stubbed here).
describe('RunView terminal button', () => {
  const me: User = { id: 'usr_me', email: 'me@example.com', name: 'Me', admin: false, disabled: false, created_at: '2025-01-01T00:00:00Z' }
  function run(status: RunStatus): Run {
    return {
      id: 'run_1',
      agent_id: 'agt_1',
      status,
      triggered_by: { id: me.id, name: 'Me' },
      parent_run_id: null,
      root_run_id: 'run_1',
      depth: 0,
      message_id: 'msg_1',
      driver: 'builtin',
      change_set_id: null,
      tokens: { input: 0, output: 0 },
      violation: null,
      reason: '',
      created_at: '2025-01-01T00:00:00Z',
      started_at: null,
      ended_at: null,
    }
  }
  class QuietEventSource {
    static CLOSED = 2
    readyState = 1
    addEventListener() {}
    close() {}
  }
  beforeEach(() => {
    vi.stubGlobal('EventSource', QuietEventSource)
    vi.stubGlobal('WebSocket', FakeSocket)
    vi.stubGlobal('fetch', vi.fn(async () => new Response('{"items":[]}', { status: 200 })))
  })

  const cases: { name: string; level: Level; status: RunStatus; offered: boolean }[] = [
    { name: 'an editor, running', level: 'editor', status: 'running', offered: true },
    { name: 'an owner, admitted', level: 'owner', status: 'admitted', offered: true },
    { name: 'a runner, running', level: 'runner', status: 'running', offered: false },
    { name: 'a viewer, running', level: 'viewer', status: 'running', offered: false },
    { name: 'an owner, paused', level: 'owner', status: 'paused', offered: false },
    { name: 'an owner, completed', level: 'owner', status: 'completed', offered: false },
  ]
  for (const c of cases) {
    it(`${c.offered ? 'offers' : 'does not offer'} ${c.name} the terminal`, () => {
      render(<RunView run={run(c.status)} can={canAt(c.level)} me={me} />)
      expect(screen.queryAllByRole('button', { name: 'Terminal' })).toHaveLength(c.offered ? 1 : 0)
    })
  }

  it('opens the terminal on click and closes it on a second', async () => {
    render(<RunView run={run('running')} can={canAt('editor')} me={me} />)
    const button = screen.getByRole('button', { name: 'Terminal' })
    expect(button.getAttribute('aria-expanded')).toBe('false')
    expect(screen.queryByTestId('terminal')).toBeNull()
    fireEvent.click(button)
    expect(await screen.findByTestId('terminal')).toBeTruthy()
    expect(button.getAttribute('aria-expanded')).toBe('true')
    // The socket opens in an effect, which may run just after the panel
    // is in the page.
    await waitFor(() => expect(FakeSocket.last?.url).toBe(`ws://${window.location.host}/api/runs/run_1/terminal`))
    const s = FakeSocket.last
    fireEvent.click(button)
    expect(screen.queryByTestId('terminal')).toBeNull()
    expect(s.readyState).toBe(3)
  })
})

// The run terminal's protocol (GET /api/runs/{id}/terminal, a WebSocket):
// where it is, who is offered it, what the browser sends, and what each way
// of closing means to the person at the keyboard. Pure functions, so the
// protocol is tested without a socket; Terminal.tsx speaks it.

import type { Can } from './types'

/** The socket's address on this page's origin: the session cookie goes with it. */
export function terminalURL(runId: string, loc: Pick<Location, 'protocol' | 'host'> = window.location): string {
  const scheme = loc.protocol === 'https:' ? 'wss:' : 'ws:'
  return `${scheme}//${loc.host}/api/runs/${encodeURIComponent(runId)}/terminal`
}

/**
 * Whether to offer the terminal: to a caller the server lets use it
 * (`use_terminal` in the agent's `can`), while the run can still have a
 * shell. A paused run is left out on purpose: the server admits only
 * runs that are admitted or running, and a button that is sure to be refused
 * is worse than none. The server decides again on every frame.
 */
export function canOpenTerminal(can: Readonly<Can> | undefined, status: string): boolean {
  if (!can?.includes('use_terminal')) return false
  return status === 'admitted' || status === 'running'
}

/**
 * The resize control message, or null for a size that is not one (fit
 * proposes nothing, or NaN, while the container is hidden or has no size).
 */
export function resizeMessage(cols: number, rows: number): string | null {
  if (!Number.isInteger(cols) || !Number.isInteger(rows) || cols < 1 || rows < 1) return null
  return JSON.stringify({ type: 'resize', cols, rows })
}

const utf8 = new TextEncoder()

/** Keystrokes as xterm's onData hands them (a string of characters), as the bytes the shell reads. */
export function encodeInput(data: string): Uint8Array<ArrayBuffer> {
  return utf8.encode(data)
}

/**
 * What xterm's onBinary hands over (some mouse reports): one character per
 * byte, 0–255. UTF-8 would turn a byte above 127 into two, so each is kept as is.
 */
export function encodeBinary(data: string): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(data.length)
  for (let i = 0; i < data.length; i++) out[i] = data.charCodeAt(i) & 0xff
  return out
}

/** Why the terminal closed, as shown, and whether trying again could help. */
export interface Closed {
  code: number
  text: string
  /** Something went wrong (shown as an alert), rather than the terminal simply being over. */
  problem: boolean
  /** Only a lost connection is worth a Reconnect button; the rest will not change by retrying. */
  reconnect: boolean
}

export const closeCodes = {
  shellExited: 1000,
  forbidden: 4403,
  gone: 4404,
} as const

/**
 * What a close code means. 1000 is the server's "the shell exited"; a close
 * the server did not choose (1006 when the network drops, 1001 when it shuts
 * down, 1011 on its error) is a lost connection.
 */
export function closeReason(code: number): Closed {
  switch (code) {
    case closeCodes.forbidden:
      return { code, text: 'You no longer have access to this terminal.', problem: true, reconnect: false }
    case closeCodes.gone:
      return { code, text: 'The run has ended.', problem: false, reconnect: false }
    case closeCodes.shellExited:
      return { code, text: 'The shell exited.', problem: false, reconnect: false }
    default:
      return { code, text: 'The connection to the terminal was lost.', problem: true, reconnect: true }
  }
}

/**
 * Why a terminal run ended, as the server words it (internal/runner): a
 * Stop by the person at it (while it ran or paused), or its time running
 * out. Such a run is over as meant, not cancelled.
 */
export const terminalEndReasons: readonly string[] = ['stopped on request', 'stopped on request while paused', "the terminal run's time ran out"]

/**
 * The word a run's end reads as: "ended" for a terminal run that its person
 * stopped or whose time ran out (the server records it as cancelled: it
 * was stopped, and its changes wait for review); otherwise its status, so a
 * terminal run cancelled for another reason (its starter's access
 * revoked), and every other run, still reads as it is.
 */
export function endWord(driver: string | undefined, status: string, reason: string | undefined): string {
  if (driver === 'terminal' && status === 'cancelled' && reason !== undefined && terminalEndReasons.includes(reason)) return 'ended'
  return status
}

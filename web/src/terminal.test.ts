import { describe, expect, it } from 'vitest'
import { canOpenTerminal, closeReason, encodeBinary, encodeInput, endWord, resizeMessage, terminalURL } from './terminal'

describe('terminalURL', () => {
  const cases: { name: string; protocol: string; host: string; id: string; want: string }[] = [
    { name: 'plain http', protocol: 'http:', host: 'localhost:8080', id: 'run_1', want: 'ws://localhost:8080/api/runs/run_1/terminal' },
    { name: 'https is wss', protocol: 'https:', host: 'corral.example.com', id: 'run_1', want: 'wss://corral.example.com/api/runs/run_1/terminal' },
    { name: 'an odd id is escaped', protocol: 'https:', host: 'h', id: '../x?y', want: 'wss://h/api/runs/..%2Fx%3Fy/terminal' },
  ]
  for (const c of cases) {
    it(c.name, () => expect(terminalURL(c.id, { protocol: c.protocol, host: c.host })).toBe(c.want))
  }
  it('defaults to this page', () => {
    expect(terminalURL('run_1')).toBe(`ws://${window.location.host}/api/runs/run_1/terminal`)
  })
})

describe('canOpenTerminal', () => {
  const statuses: { status: string; open: boolean }[] = [
    { status: 'admitted', open: true },
    { status: 'running', open: true },
    { status: 'paused', open: false },
    { status: 'connecting', open: false },
    { status: 'completed', open: false },
    { status: 'cancelled', open: false },
    { status: 'killed', open: false },
    { status: 'errored', open: false },
    { status: 'reconciled', open: false },
  ]
  for (const useTerminal of [false, true]) {
    for (const s of statuses) {
      const want = s.open && useTerminal
      it(`canOpenTerminal(use_terminal ${useTerminal}, ${s.status}) = ${want}`, () =>
        expect(canOpenTerminal(useTerminal ? ['view_runs', 'use_terminal'] : ['view_runs'], s.status)).toBe(want))
    }
  }
  it('refuses when the agent is not loaded', () => {
    expect(canOpenTerminal(undefined, 'running')).toBe(false)
  })
})

describe('resizeMessage', () => {
  const cases: { name: string; cols: number; rows: number; want: string | null }[] = [
    { name: 'a usual size', cols: 80, rows: 24, want: '{"type":"resize","cols":80,"rows":24}' },
    { name: 'the smallest', cols: 1, rows: 1, want: '{"type":"resize","cols":1,"rows":1}' },
    { name: 'no columns', cols: 0, rows: 24, want: null },
    { name: 'no rows', cols: 80, rows: 0, want: null },
    { name: 'negative', cols: -3, rows: 24, want: null },
    { name: 'a fraction', cols: 80.5, rows: 24, want: null },
    { name: 'NaN from a hidden box', cols: NaN, rows: NaN, want: null },
    { name: 'infinite', cols: Infinity, rows: 24, want: null },
  ]
  for (const c of cases) {
    it(c.name, () => expect(resizeMessage(c.cols, c.rows)).toBe(c.want))
  }
})

describe('encodeInput', () => {
  const cases: { name: string; data: string; want: number[] }[] = [
    { name: 'ascii and enter', data: 'ls\r', want: [0x6c, 0x73, 0x0d] },
    { name: 'ctrl-c', data: '\x03', want: [0x03] },
    { name: 'an arrow key', data: '\x1b[A', want: [0x1b, 0x5b, 0x41] },
    { name: 'non-ascii is utf-8', data: 'é€', want: [0xc3, 0xa9, 0xe2, 0x82, 0xac] },
    { name: 'nothing', data: '', want: [] },
  ]
  for (const c of cases) {
    it(c.name, () => expect([...encodeInput(c.data)]).toEqual(c.want))
  }
})

describe('encodeBinary', () => {
  const cases: { name: string; data: string; want: number[] }[] = [
    { name: 'a mouse report keeps high bytes as one byte each', data: '\x1b[M\x20\xa1\xff', want: [0x1b, 0x5b, 0x4d, 0x20, 0xa1, 0xff] },
    { name: 'nothing', data: '', want: [] },
  ]
  for (const c of cases) {
    it(c.name, () => expect([...encodeBinary(c.data)]).toEqual(c.want))
  }
})

describe('closeReason', () => {
  const cases: { name: string; code: number; text: string; problem: boolean; reconnect: boolean }[] = [
    { name: 'access revoked', code: 4403, text: 'You no longer have access to this terminal.', problem: true, reconnect: false },
    { name: 'run over', code: 4404, text: 'The run has ended.', problem: false, reconnect: false },
    { name: 'shell exited', code: 1000, text: 'The shell exited.', problem: false, reconnect: false },
    { name: 'network dropped', code: 1006, text: 'The connection to the terminal was lost.', problem: true, reconnect: true },
    { name: 'server going away', code: 1001, text: 'The connection to the terminal was lost.', problem: true, reconnect: true },
    { name: 'server error', code: 1011, text: 'The connection to the terminal was lost.', problem: true, reconnect: true },
    { name: 'an unknown application code', code: 4000, text: 'The connection to the terminal was lost.', problem: true, reconnect: true },
  ]
  for (const c of cases) {
    it(c.name, () => expect(closeReason(c.code)).toEqual({ code: c.code, text: c.text, problem: c.problem, reconnect: c.reconnect }))
  }
})

describe('endWord', () => {
  const cases: [string, string | undefined, string, string | undefined, string][] = [
    ['a terminal run its person stopped', 'terminal', 'cancelled', 'stopped on request', 'ended'],
    ['a terminal run whose time ran out', 'terminal', 'cancelled', "the terminal run's time ran out", 'ended'],
    ['a terminal run cancelled because its starter lost access', 'terminal', 'cancelled', 'the person who started the run may no longer run this agent', 'cancelled'],
    ['a terminal run cancelled without a reason', 'terminal', 'cancelled', undefined, 'cancelled'],
    ['a killed terminal run', 'terminal', 'killed', 'killed on request', 'killed'],
    ['a terminal run still running', 'terminal', 'running', '', 'running'],
    ['an agent’s run stopped on request', 'builtin', 'cancelled', 'stopped on request', 'cancelled'],
    ['a CLI run stopped on request', 'codex', 'cancelled', 'stopped on request', 'cancelled'],
    ['a run of an older server (no driver)', undefined, 'cancelled', 'stopped on request', 'cancelled'],
  ]
  for (const [name, driver, status, reason, want] of cases) {
    it(`${name}: ${want}`, () => expect(endWord(driver, status, reason)).toBe(want))
  }
})

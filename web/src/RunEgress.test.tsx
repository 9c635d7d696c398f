// A run's timeline reads what the egress proxy refused and what it let
// through; on a refusal, someone who may edit the agent allows the host in
// one click (the PATCH keeps the rest of the allow-list and turns it on);
// a viewer is not offered it, and a host already allowed is not offered
// again.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import type { Egress, NetworkMode } from './egress'
import { RunPage } from './pages/Run'
import { agentWithEgress, FakeEventSource, serveRoutes } from './testkit'
import type { Agent, Level, Run, TraceEvent, TraceType } from './types'

const r: Run = {
  id: 'run_abcdef12',
  agent_id: 'agt_1',
  status: 'completed',
  triggered_by: { id: 'usr_me', name: 'Me' },
  parent_run_id: null,
  root_run_id: 'run_abcdef12',
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

// `egress` and `egress_denied` are not in the generated TraceType yet (see egress.ts).
function ev(seq: number, type: string, data: Record<string, unknown>): TraceEvent {
  return { seq, at: '2025-01-01T00:00:00Z', type: type as TraceType, data, hash: '', prev_hash: '' }
}

const trace = [
  ev(1, 'started', {}),
  ev(2, 'egress_denied', { host: 'registry.example.com', port: 443, method: 'GET', path: '/left-pad', rule: 'host not on the allow-list' }),
  ev(3, 'egress', { host: 'registry.npmjs.org', requests: 12, bytes_in: 3565158, bytes_out: 2048 }),
  ev(4, 'ended', { status: 'completed' }),
]

const kept: Egress = { allow: [{ host: 'files.example.com', ports: [8443] }], presets: ['npm'] }

function serve(access: Level, network: NetworkMode, egress: Egress) {
  let agent: Agent = agentWithEgress(access, network, egress)
  const calls = serveRoutes((method, url, body) => {
    if (url === '/api/runs/run_abcdef12') return [200, r]
    if (url === '/api/runs/run_abcdef12/trace') return [200, { items: trace }]
    if (url === '/api/runs/run_abcdef12/tree') return [200, { items: [r] }]
    if (url !== '/api/agents/agt_1') return undefined
    if (method === 'PATCH') {
      const policy = (body as { policy: object }).policy
      agent = { ...agent, policy: { ...agent.policy, ...policy } }
    }
    return [200, agent]
  })
  return calls
}

beforeEach(() => vi.stubGlobal('EventSource', FakeEventSource))
afterEach(() => vi.unstubAllGlobals())

async function refusal(): Promise<HTMLElement> {
  const title = await screen.findByText('Refused: GET registry.example.com:443/left-pad — host not on the allow-list')
  return title.closest('li')!
}

describe('the egress proxy in a run’s timeline', () => {
  it('reads a refusal and a host’s summary in words', async () => {
    serve('viewer', 'allowlist', kept)
    render(<RunPage id="run_abcdef12" />)
    expect((await refusal()).className).toContain('tl-warn')
    const summary = screen.getByText('registry.npmjs.org: 12 requests, 3.4 MiB in').closest('li')!
    expect(within(summary).getByText('2.0 KiB out')).toBeTruthy()
  })

  it('lets an editor allow the refused host in one click, keeping the rest of the allow-list', async () => {
    const calls = serve('editor', 'none', kept)
    render(<RunPage id="run_abcdef12" />)
    const item = await refusal()
    const button = within(item).getByRole('button', { name: 'Allow this host: registry.example.com' }) as HTMLButtonElement
    expect(button.disabled).toBe(false)
    fireEvent.click(button)
    expect((await within(item).findByRole('status')).textContent).toBe('Allowed registry.example.com: the agent’s next runs may reach it.')
    // It read the agent again before it changed it, so the rest is kept as it now is.
    expect(calls.filter((c) => c.url === '/api/agents/agt_1').map((c) => c.method)).toEqual(['GET', 'GET', 'PATCH'])
    expect(calls.filter((c) => c.method === 'PATCH').map((c) => c.body)).toEqual([
      { policy: { network: 'allowlist', egress: { allow: [...kept.allow, { host: 'registry.example.com' }], presets: ['npm'] } } },
    ])
    await waitFor(() => expect(button.disabled).toBe(true))
  })

  it('offers nothing to click for a host already on the allow-list', async () => {
    const calls = serve('owner', 'allowlist', { allow: [{ host: '*.example.com' }], presets: [] })
    render(<RunPage id="run_abcdef12" />)
    const item = await refusal()
    expect((within(item).getByRole('button', { name: 'Allow this host: registry.example.com' }) as HTMLButtonElement).disabled).toBe(true)
    expect(within(item).getByText('registry.example.com is on the allow-list now.')).toBeTruthy()
    expect(calls.some((c) => c.method === 'PATCH')).toBe(false)
  })

  for (const access of ['viewer', 'runner'] as const) {
    it(`offers a ${access} no Allow button`, async () => {
      serve(access, 'none', kept)
      render(<RunPage id="run_abcdef12" />)
      const item = await refusal()
      expect(within(item).queryByRole('button')).toBeNull()
    })
  }
})

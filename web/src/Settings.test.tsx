// The settings page's driver: an editor chooses it (sent in the PATCH
// body), the form starts from the agent's, and a viewer or runner reads it.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen } from '@testing-library/react'
import { SettingsPage } from './pages/Settings'
import { agentAt, serveRoutes } from './testkit'
import type { Agent, Driver, Level } from './types'

afterEach(() => vi.unstubAllGlobals())

function serve(a: Agent) {
  return serveRoutes((method, url, body) => {
    if (url === '/api/egress/presets' || url === '/api/agents/agt_1/secrets') return [200, { items: [] }]
    if (url !== '/api/agents/agt_1') return undefined
    if (method === 'GET') return [200, a]
    if (method === 'PATCH') return [200, { ...a, ...(body as object) }]
    return undefined
  })
}

function withDriver(access: Level, driver: Driver | string): Agent {
  return { ...agentAt(access), driver: driver as Driver }
}

async function driverSelect(): Promise<HTMLSelectElement> {
  return (await screen.findByLabelText('Driver')) as HTMLSelectElement
}

describe('SettingsPage driver, for an editor', () => {
  it('offers the four drivers, each with its line, and says where a CLI runs', async () => {
    serve(withDriver('editor', 'builtin'))
    render(<SettingsPage id="agt_1" />)
    const select = await driverSelect()
    expect([...select.options].map((o) => [o.value, o.textContent])).toEqual([
      ['builtin', 'Corral’s agent loop (built in)'],
      ['codex', 'Codex CLI (OpenAI Responses API)'],
      ['claude-code', 'Claude Code (Anthropic Messages API)'],
      ['opencode', 'OpenCode (Chat Completions)'],
    ])
    const hint = document.getElementById(select.getAttribute('aria-describedby') ?? '')
    expect(hint?.textContent).toBe('An agent CLI runs inside the run’s sandbox and reaches only Corral’s gateway, metered against the budget.')
  })

  const cases: { name: string; from: Driver | string; choose?: Driver; sent: string }[] = [
    { name: 'sends the driver chosen', from: 'builtin', choose: 'codex', sent: 'codex' },
    { name: 'sends a CLI agent back to the built-in loop', from: 'claude-code', choose: 'builtin', sent: 'builtin' },
    { name: 'keeps the agent’s driver when it is not changed', from: 'opencode', sent: 'opencode' },
    { name: 'keeps a driver this page does not know', from: 'aider', sent: 'aider' },
  ]
  for (const c of cases) {
    it(c.name, async () => {
      const calls = serve(withDriver('editor', c.from))
      render(<SettingsPage id="agt_1" />)
      const select = await driverSelect()
      expect(select.value).toBe(c.from)
      if (c.choose) fireEvent.change(select, { target: { value: c.choose } })
      fireEvent.click(screen.getByRole('button', { name: 'Save' }))
      await screen.findByText('Saved.')
      const patch = calls.find((x) => x.method === 'PATCH')
      expect((patch?.body as { driver?: string }).driver).toBe(c.sent)
    })
  }
})

describe('SettingsPage driver, read-only', () => {
  const cases: { access: Level; driver: Driver; shown: string }[] = [
    { access: 'viewer', driver: 'codex', shown: 'Codex CLI (OpenAI Responses API)' },
    { access: 'runner', driver: 'claude-code', shown: 'Claude Code (Anthropic Messages API)' },
    { access: 'viewer', driver: 'builtin', shown: 'Corral’s agent loop (built in)' },
  ]
  for (const c of cases) {
    it(`shows a ${c.access} the ${c.driver} driver`, async () => {
      serve(withDriver(c.access, c.driver))
      render(<SettingsPage id="agt_1" />)
      const dt = await screen.findByText('Driver', { selector: 'dt' })
      expect(dt.nextElementSibling?.textContent).toBe(c.shown)
      expect(screen.queryByLabelText('Driver')).toBeNull()
    })
  }
})

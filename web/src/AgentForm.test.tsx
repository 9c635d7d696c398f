// The agent form's model picker (the gateway's models, the default marked,
// "Other…" for any other name, a word when no provider is configured) and
// its limits in human units (sent as the API's numbers, each field showing
// the server's default).
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import { SettingsPage } from './pages/Settings'
import { agentAt, serveRoutes } from './testkit'
import type { Agent, Limits, LimitsInfo, ModelList } from './types'

afterEach(() => vi.unstubAllGlobals())

const defaults: LimitsInfo = {
  defaults: {
    max_prompt_bytes: 262144, max_runs: null, run_timeout_s: 1800, cpu_millis: 1_800_000, memory_bytes: 536870912,
    pids: 128, output_bytes: 1048576, disk_bytes: 1073741824, disk_inodes: 100000, pending_disk_bytes: 4294967296,
  },
  max: {} as Limits,
  notes: {},
}

const scripted: ModelList = { models: [{ id: 'scripted' }, { id: 'scripted-mini' }], default: 'scripted', configured: true, listed: true }

function serve(a: Agent, models: ModelList | null = scripted) {
  return serveRoutes((method, url, body) => {
    if (url === '/api/models') return models ? [200, models] : [503, { error: { code: 'unavailable', message: 'no' } }]
    if (url === '/api/limits') return [200, defaults]
    if (url === '/api/egress/presets' || url === '/api/agents/agt_1/secrets') return [200, { items: [] }]
    if (url !== '/api/agents/agt_1') return undefined
    if (method === 'GET') return [200, a]
    if (method === 'PATCH') return [200, { ...a, ...(body as object) }]
    return undefined
  })
}

async function save(calls: ReturnType<typeof serve>) {
  fireEvent.click(screen.getByRole('button', { name: 'Save' }))
  await screen.findByText('Saved.')
  return calls.find((c) => c.method === 'PATCH')?.body as { model: string; limits: Limits }
}

describe('the model picker', () => {
  it('offers the server default and the gateway’s models, the default marked', async () => {
    serve(agentAt('editor'))
    render(<SettingsPage id="agt_1" />)
    const select = (await screen.findByRole('combobox', { name: 'Model' })) as HTMLSelectElement
    expect([...select.options].map((o) => o.textContent)).toEqual(['Server default (scripted)', 'scripted (the default)', 'scripted-mini', 'Other…'])
    expect(select.value).toBe('')
    const hint = document.getElementById(select.getAttribute('aria-describedby') ?? '')
    expect(hint?.textContent).toMatch(/^The models the server’s model provider lists/)
  })

  it('says so when the provider lists no models, offering the default', async () => {
    serve(agentAt('editor'), { models: [{ id: 'scripted' }], default: 'scripted', configured: true, listed: false })
    render(<SettingsPage id="agt_1" />)
    const select = (await screen.findByRole('combobox', { name: 'Model' })) as HTMLSelectElement
    expect([...select.options].map((o) => o.textContent)).toEqual(['Server default (scripted)', 'scripted (the default)', 'Other…'])
    const hint = document.getElementById(select.getAttribute('aria-describedby') ?? '')
    expect(hint?.textContent).toMatch(/^The model provider does not list its models/)
  })

  const cases: { name: string; from: string; choose?: string; other?: string; sent: string }[] = [
    { name: 'keeps the server default', from: '', sent: '' },
    { name: 'sends a model chosen from the list', from: '', choose: 'scripted-mini', sent: 'scripted-mini' },
    { name: 'sends a name typed under Other…', from: '', choose: 'Other…', other: 'llama3.2', sent: 'llama3.2' },
    { name: 'keeps a model the list does not hold', from: 'gpt-4o', sent: 'gpt-4o' },
  ]
  for (const c of cases) {
    it(c.name, async () => {
      const calls = serve({ ...agentAt('editor'), model: c.from })
      render(<SettingsPage id="agt_1" />)
      const select = (await screen.findByRole('combobox', { name: 'Model' })) as HTMLSelectElement
      if (c.from && !c.choose) expect((screen.getByLabelText('Model name') as HTMLInputElement).value).toBe(c.from)
      if (c.choose) {
        const opt = [...select.options].find((o) => o.textContent === c.choose || o.value === c.choose)!
        fireEvent.change(select, { target: { value: opt.value } })
      }
      if (c.other !== undefined) fireEvent.change(screen.getByLabelText('Model name'), { target: { value: c.other } })
      expect((await save(calls)).model).toBe(c.sent)
    })
  }

  it('says so when no provider is configured', async () => {
    serve(agentAt('editor'), { models: [], default: '', configured: false, listed: false })
    render(<SettingsPage id="agt_1" />)
    const select = await screen.findByRole('combobox', { name: 'Model' })
    const hint = document.getElementById(select.getAttribute('aria-describedby') ?? '')
    expect(hint?.textContent).toMatch(/^No model provider is configured on this server/)
  })

  it('falls back to a text box when the list cannot be had', async () => {
    const calls = serve({ ...agentAt('editor'), model: 'mine' }, null)
    render(<SettingsPage id="agt_1" />)
    const box = (await screen.findByRole('textbox', { name: 'Model' })) as HTMLInputElement
    expect(box.value).toBe('mine')
    expect((await save(calls)).model).toBe('mine')
  })
})

describe('limits in human units', () => {
  it('shows each field in its unit with the server’s default under it', async () => {
    serve({ ...agentAt('editor'), limits: { ...agentAt('editor').limits, memory_bytes: 1 << 30, run_timeout_s: 600 } })
    render(<SettingsPage id="agt_1" />)
    const memory = (await screen.findByRole('textbox', { name: 'Memory' })) as HTMLInputElement
    expect(memory.value).toBe('1')
    expect((screen.getByRole('combobox', { name: 'Memory unit' }) as HTMLSelectElement).value).toBe('GiB')
    expect((screen.getByRole('textbox', { name: 'Run time limit' }) as HTMLInputElement).value).toBe('10')
    const hint = (name: string) => document.getElementById(screen.getByRole('textbox', { name }).getAttribute('aria-describedby') ?? '')?.textContent
    await waitFor(() => expect(hint('Memory')).toBe('default: 512 MiB'))
    expect(hint('Most runs')).toBe('default: no limit')
    expect(hint('Files per run')).toBe('default: 100,000')
    expect(hint('CPU time per run')).toBe('default: the run’s time on one core (10 min)')
    expect((screen.getByRole('textbox', { name: 'Processes at once' }) as HTMLInputElement).value).toBe('')
  })

  it('sends what was typed as the API’s numbers, empty as 0', async () => {
    const calls = serve(agentAt('editor'))
    render(<SettingsPage id="agt_1" />)
    fireEvent.change(await screen.findByRole('textbox', { name: 'Memory' }), { target: { value: '1.5' } })
    fireEvent.change(screen.getByRole('combobox', { name: 'Memory unit' }), { target: { value: 'GiB' } })
    fireEvent.change(screen.getByRole('textbox', { name: 'Run time limit' }), { target: { value: '2' } })
    fireEvent.change(screen.getByRole('combobox', { name: 'Run time limit unit' }), { target: { value: 'hours' } })
    fireEvent.change(screen.getByRole('textbox', { name: 'CPU time per run' }), { target: { value: '90' } })
    fireEvent.change(screen.getByRole('combobox', { name: 'CPU time per run unit' }), { target: { value: 'seconds' } })
    fireEvent.change(screen.getByRole('textbox', { name: 'Processes at once' }), { target: { value: '64' } })
    const { limits } = await save(calls)
    expect(limits).toEqual({
      max_prompt_bytes: 0, max_runs: 0, run_timeout_s: 7200, cpu_millis: 90_000, memory_bytes: 1610612736,
      pids: 64, output_bytes: 0, disk_bytes: 0, disk_inodes: 0, pending_disk_bytes: 0,
    })
  })

  it('refuses a value that is not a number, in words, and sends nothing', async () => {
    const calls = serve(agentAt('editor'))
    render(<SettingsPage id="agt_1" />)
    fireEvent.change(await screen.findByRole('textbox', { name: 'Memory' }), { target: { value: 'lots' } })
    fireEvent.click(screen.getByRole('button', { name: 'Save' }))
    expect((await screen.findByRole('alert')).textContent).toBe('Memory must be a number, or empty for the server’s default.')
    expect(calls.some((c) => c.method === 'PATCH')).toBe(false)
  })

  it('shows a viewer the values in words and the defaults', async () => {
    serve({ ...agentAt('viewer'), limits: { ...agentAt('viewer').limits, memory_bytes: 1 << 30 } })
    render(<SettingsPage id="agt_1" />)
    const fact = (label: string) => screen.getByText(label, { selector: 'dt' }).nextElementSibling?.textContent
    await screen.findByText('Memory', { selector: 'dt' })
    expect(fact('Memory')).toBe('1 GiB')
    await waitFor(() => expect(fact('Most runs')).toBe('server default (no limit)'))
    expect(fact('Disk per run')).toBe('server default (1 GiB)')
    expect(within(document.body).queryByRole('textbox', { name: 'Memory' })).toBeNull()
  })
})

describe('the shared library', () => {
  const cases: { name: string; from: boolean; click: boolean; sent: boolean }[] = [
    { name: 'is off for an agent that does not use it, and stays off', from: false, click: false, sent: false },
    { name: 'is turned on', from: false, click: true, sent: true },
    { name: 'is on for an agent that uses it, and turned off', from: true, click: true, sent: false },
  ]
  for (const c of cases) {
    it(c.name, async () => {
      const a = agentAt('editor')
      const calls = serve({ ...a, policy: { ...a.policy, library: c.from } })
      render(<SettingsPage id="agt_1" />)
      const box = (await screen.findByRole('checkbox', { name: 'Use the shared library' })) as HTMLInputElement
      expect(box.checked).toBe(c.from)
      expect(document.getElementById(box.getAttribute('aria-describedby') ?? '')?.textContent).toMatch(/untrusted/)
      if (c.click) fireEvent.click(box)
      const body = (await save(calls)) as unknown as { policy: { library: boolean } }
      expect(body.policy.library).toBe(c.sent)
    })
  }

  it('shows a viewer whether it is searched', async () => {
    const a = agentAt('viewer')
    serve({ ...a, policy: { ...a.policy, library: true } })
    render(<SettingsPage id="agt_1" />)
    const dt = await screen.findByText('Shared library', { selector: 'dt' })
    expect(dt.nextElementSibling?.textContent).toBe('searched')
    expect(screen.queryByRole('checkbox', { name: 'Use the shared library' })).toBeNull()
  })
})

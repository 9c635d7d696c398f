// The settings' Network section: the server's presets offered with their
// hosts, none or the allow-list, hosts of its own added and removed, all
// sent in the PATCH body (egress replacing the whole allow-list); a host
// that is not one refused in words; a viewer reads it.
import { afterEach, describe, expect, it, vi } from 'vitest'
import { fireEvent, render, screen, waitFor, within } from '@testing-library/react'
import type { Egress, EgressPreset } from './egress'
import { SettingsPage } from './pages/Settings'
import { agentWithEgress, serveRoutes } from './testkit'
import type { Agent } from './types'

afterEach(() => vi.unstubAllGlobals())

const presets: EgressPreset[] = [
  { name: 'npm', hosts: ['registry.npmjs.org'] },
  { name: 'pypi', hosts: ['pypi.org', 'files.pythonhosted.org'] },
  { name: 'go', hosts: ['proxy.golang.org', 'sum.golang.org'] },
]

function serve(a: Agent) {
  return serveRoutes((method, url) => {
    if (url === '/api/egress/presets') return [200, { items: presets }]
    if (url === '/api/agents/agt_1/secrets') return [200, { items: [] }]
    if (url === '/api/models') return [200, { models: [], default: 'scripted', configured: true, listed: false }]
    if (url === '/api/limits') return [503, { error: { code: 'unavailable', message: 'no limits here' } }]
    if (url !== '/api/agents/agt_1') return undefined
    if (method === 'GET') return [200, a]
    if (method === 'PATCH') return [200, a]
    return undefined
  })
}

async function save(calls: ReturnType<typeof serve>) {
  fireEvent.click(screen.getByRole('button', { name: 'Save' }))
  await screen.findByText('Saved.')
  return (calls.find((c) => c.method === 'PATCH')?.body as { policy: { network: string; egress: Egress } }).policy
}

function row(n: number) {
  return within(screen.getByRole('group', { name: `Allowed host ${n}` }))
}

describe('the Network section, for an editor', () => {
  it('offers the server’s presets with their hosts, the agent’s ticked', async () => {
    serve(agentWithEgress('editor', 'allowlist', { allow: [], presets: ['pypi'] }))
    render(<SettingsPage id="agt_1" />)
    const npm = (await screen.findByRole('checkbox', { name: 'npm: registry.npmjs.org' })) as HTMLInputElement
    const pypi = screen.getByRole('checkbox', { name: 'pypi: pypi.org, files.pythonhosted.org' }) as HTMLInputElement
    expect(npm.checked).toBe(false)
    expect(pypi.checked).toBe(true)
    expect((screen.getByRole('radio', { name: /^Allow-list/ }) as HTMLInputElement).checked).toBe(true)
  })

  it('sends none and the allow-list it keeps for an agent without a network', async () => {
    const calls = serve(agentWithEgress('editor', 'none', { allow: [], presets: [] }))
    render(<SettingsPage id="agt_1" />)
    await screen.findByRole('checkbox', { name: 'npm: registry.npmjs.org' })
    expect((screen.getByRole('radio', { name: /^None/ }) as HTMLInputElement).checked).toBe(true)
    expect(await save(calls)).toMatchObject({ network: 'none', egress: { allow: [], presets: [] } })
  })

  it('turns the allow-list on with presets and hosts added and removed, and sends all of it', async () => {
    const calls = serve(agentWithEgress('editor', 'none', { allow: [{ host: 'old.example.com' }], presets: ['go'] }))
    render(<SettingsPage id="agt_1" />)
    fireEvent.click(await screen.findByRole('radio', { name: /^Allow-list/ }))
    fireEvent.click(await screen.findByRole('checkbox', { name: 'npm: registry.npmjs.org' }))
    fireEvent.click(screen.getByRole('checkbox', { name: 'go: proxy.golang.org, sum.golang.org' }))
    expect((row(1).getByLabelText('Host') as HTMLInputElement).value).toBe('old.example.com')
    fireEvent.click(screen.getByRole('button', { name: 'Add a host' }))
    fireEvent.change(row(2).getByLabelText('Host'), { target: { value: 'npm.internal.example' } })
    fireEvent.change(row(2).getByLabelText('Ports'), { target: { value: '443, 8443' } })
    fireEvent.change(row(2).getByLabelText('Methods'), { target: { value: 'get head' } })
    fireEvent.change(row(2).getByLabelText('Path prefixes'), { target: { value: '/npm/' } })
    fireEvent.click(screen.getByRole('button', { name: 'Add a host' }))
    fireEvent.change(row(3).getByLabelText('Host'), { target: { value: '*.githubusercontent.com' } })
    fireEvent.click(screen.getByRole('button', { name: 'Add a host' })) // left blank: not sent
    fireEvent.click(screen.getByRole('button', { name: 'Remove allowed host 1' }))
    expect(await save(calls)).toMatchObject({
      network: 'allowlist',
      egress: {
        allow: [
          { host: 'npm.internal.example', ports: [443, 8443], methods: ['GET', 'HEAD'], paths: ['/npm/'] },
          { host: '*.githubusercontent.com' },
        ],
        presets: ['npm'],
      },
    })
  })

  it('refuses a port that is not one, in words, and sends nothing', async () => {
    const calls = serve(agentWithEgress('editor', 'allowlist', { allow: [], presets: [] }))
    render(<SettingsPage id="agt_1" />)
    fireEvent.click(await screen.findByRole('button', { name: 'Add a host' }))
    fireEvent.change(row(1).getByLabelText('Host'), { target: { value: 'registry.example.com' } })
    fireEvent.change(row(1).getByLabelText('Ports'), { target: { value: 'https' } })
    fireEvent.click(screen.getByRole('button', { name: 'Save' }))
    await waitFor(() => expect(screen.getAllByRole('alert').map((a) => a.textContent)).toContain('Allowed host 1: ports are whole numbers from 1 to 65535, such as 443, 8443.'))
    expect(calls.some((c) => c.method === 'PATCH')).toBe(false)
  })
})

describe('the Network section, read-only', () => {
  it('shows a viewer the network, presets and hosts, with nothing to change', async () => {
    serve(
      agentWithEgress('viewer', 'allowlist', {
        allow: [{ host: 'registry.example.com', ports: [8443], methods: ['GET'], paths: ['/v2/'] }, { host: 'files.example.com' }],
        presets: ['npm', 'pypi'],
      }),
    )
    render(<SettingsPage id="agt_1" />)
    const fact = (label: string) => screen.getByText(label, { selector: 'dt' }).nextElementSibling
    await screen.findByText('Network', { selector: 'dt' })
    expect(fact('Network')?.textContent).toBe('allow-list')
    expect(fact('Registries')?.textContent).toBe('npm, pypi')
    expect([...fact('Allowed hosts')!.querySelectorAll('li')].map((li) => li.textContent)).toEqual([
      'registry.example.com · port 8443 · GET · under /v2/',
      'files.example.com · ports 80 and 443 · any method',
    ])
    expect(screen.queryByRole('radio')).toBeNull()
    expect(screen.queryByRole('button', { name: 'Add a host' })).toBeNull()
  })
})

// The browser test's step for the administrators' page (issue 30): people
// (an account disabled and enabled, an invite link), the server's nodes,
// the runs in flight, usage by agent and person as a chart and a table, and
// every budget. run.mjs calls it once runs have spent tokens.

import { fail, hasText, shot, visible } from './lib.mjs'

/** Alice, the admin, walks the admin page; Bob's account is disabled and enabled again. */
export async function adminPage(page, agentName) {
  const nav = page.getByRole('navigation', { name: 'Main' })
  await nav.getByRole('link', { name: 'Admin', exact: true }).click()
  await visible(page.getByRole('heading', { name: 'Admin', level: 1 }), 'the admin page')

  await visible(page.getByRole('heading', { name: 'Runs in flight', level: 2 }), 'the runs in flight')
  const byAgent = page.getByRole('table', { name: 'Tokens by agent, last 30 days' })
  const spent = byAgent.getByRole('row').filter({ hasText: agentName })
  await visible(spent, `${agentName}’s usage`)
  const tokens = Number(((await spent.getByRole('cell').last().textContent()) ?? '').replace(/,/g, ''))
  if (!(tokens > 0)) fail(`${agentName}’s usage reads ${tokens} tokens, want some`)
  await visible(page.getByRole('img', { name: 'Tokens per day over the last 30 days' }), 'the usage chart')
  await page.getByRole('button', { name: 'By person', exact: true }).click()
  await visible(page.getByRole('table', { name: 'Tokens by person, last 30 days' }).getByRole('row').filter({ hasText: 'Alice' }), 'Alice’s usage')
  await visible(page.getByRole('table', { name: 'Budgets' }).getByRole('row').filter({ hasText: agentName }), `${agentName}’s budget`)
  await visible(page.getByText('This server runs its sandboxes itself: it has no sandbox nodes.', { exact: true }), 'the nodes of a server of role all')

  const bob = page.getByRole('table', { name: 'Accounts' }).getByRole('row').filter({ hasText: 'bob@example.com' })
  await bob.getByRole('button', { name: 'Disable Bob', exact: true }).click()
  await hasText(bob, 'disabled', 'Bob’s account once disabled')
  await bob.getByRole('button', { name: 'Enable Bob', exact: true }).click()
  await visible(bob.getByRole('button', { name: 'Disable Bob', exact: true }), 'Bob’s account enabled again')

  await page.getByRole('button', { name: 'Invite someone', exact: true }).click()
  await hasText(page.getByRole('status').filter({ hasText: 'Send this link' }), '/signup?invite=', 'the invite link')
  await page.evaluate(() => window.scrollTo(0, 0))
  await shot(page, 'admin')
}

// The browser test's steps for the first hour (issue 25): the first-run
// screen, the model picker and limits in units, where change sets wait for
// review (the call to action, the counts, the inbox), and how a
// conversation and a run read (Markdown answers, delegation by name, an
// agent CLI's run as steps, a terminal run that ends, narrow screens).
// run.mjs calls them in order.

import { join } from 'node:path'
import { artifacts, count, fail, hasText, shot, until, visible } from './lib.mjs'


/** Creates an agent by name from the New agent page; resolves with its page's URL. */
export async function createAgent(page, base, name) {
  await page.goto(`${base}/agents/new`)
  await page.getByLabel('Name', { exact: true }).fill(name)
  await page.getByRole('button', { name: 'Create agent', exact: true }).click()
  await visible(page.getByRole('heading', { name, level: 1 }), `the new agent ${name}’s page`)
  return page.url().replace(/\?.*$/, '')
}

/** Sends a message on an agent's conversation and waits for its run to complete. */
export async function sendAndComplete(page, message) {
  await page.getByLabel('Message', { exact: true }).fill(message)
  await page.getByRole('button', { name: 'Send', exact: true }).click()
  const live = page.getByRole('region', { name: /Run in progress|Latest run/ })
  await hasText(live.getByRole('status'), 'completed', `the run of “${message}”`)
  return live
}

/**
 * The scripted model answers in Markdown with raw HTML in it: the heading,
 * list and code block render, the HTML does not (no <img>, no script ran,
 * the javascript: link is no link), and Copy puts the code on the clipboard.
 */
export async function markdownAnswer(page, base) {
  const dialogs = []
  page.on('dialog', (d) => {
    dialogs.push(d.message())
    void d.dismiss()
  })
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base })
  const url = await createAgent(page, base, 'lead-agent')
  await sendAndComplete(page, 'answer in markdown, please')
  const answer = page.getByRole('list', { name: 'Thread' }).getByRole('listitem').filter({ hasText: 'Test plan' })
  await visible(answer.getByRole('heading', { name: 'Test plan' }), 'the answer’s Markdown heading')
  await visible(answer.getByRole('listitem').filter({ hasText: 'build the binary' }), 'the answer’s list')
  await hasText(answer.locator('.md strong'), 'unit', 'the answer’s bold text')
  const code = answer.locator('pre code.language-sh')
  await hasText(code, 'make test', 'the answer’s code block, with its language class')
  await count(answer.locator('img'), 0, 'images in the answer (its raw <img onerror> must not come through)')
  await count(page.locator('.thread script, .thread iframe'), 0, 'scripts in the thread')
  await count(answer.locator('a[href^="javascript" i]'), 0, 'javascript: links in the answer')
  await hasText(answer, 'the docs', 'the javascript: link, shown as its text')
  if ((await page.title()) === 'pwned') fail('the answer’s HTML ran a script')
  const copy = answer.getByRole('button', { name: 'Copy sh', exact: true })
  await copy.click()
  await hasText(copy, 'Copied', 'the Copy button after a click')
  const copied = await page.evaluate(() => navigator.clipboard.readText())
  if (copied !== 'make test') fail(`the clipboard holds ${JSON.stringify(copied)}, not the code block`)
  if (dialogs.length > 0) fail(`the answer opened dialogs: ${dialogs.join(', ')}`)
  await answer.scrollIntoViewIfNeeded()
  await shot(page, 'markdown-answer')
  return url
}

/**
 * The scripted model lists the agents and delegates to hello-agent: the
 * conversation, the run page's tree and its timeline name the agent.
 */
export async function delegationByName(page, target) {
  const live = await sendAndComplete(page, `delegate to ${target}: say hello`)
  await visible(page.getByRole('list', { name: 'Thread' }).getByText(`${target} did it.`), 'the lead’s answer after delegating')
  await hasText(live.getByRole('list', { name: 'Run timeline' }), `Delegated to ${target}:`, 'the live timeline’s delegation, by name')
  await live.getByRole('link', { name: /^open run / }).click()
  await visible(page.getByRole('heading', { name: /^Run /, level: 1 }), 'the delegating run’s page')
  const tree = page.getByRole('region', { name: 'Delegation' })
  await visible(tree.getByRole('link', { name: target, exact: true }), `the delegated run’s agent ${target} in the tree`)
  await hasText(tree.locator('.badge-status'), 'completed', 'the delegated run’s status in the tree')
  await hasText(page.getByRole('list', { name: 'Run timeline' }), `Delegated to ${target}:`, 'the run page’s timeline')
  await shot(page, 'run-tree')
  return page.url()
}

/**
 * An agent CLI's run (Codex, from the tools directory) reads as steps: the
 * scripted model has it run a command with its own shell tool; the
 * timeline shows the command (unwrapped from its shell) with its output
 * folded, Codex's "model metadata not found" as a warning, the model's
 * message, and what Codex printed besides its events folded, never the JSON.
 */
export async function cliTranscript(page, base) {
  await createAgent(page, base, 'codex-agent')
  const tabs = page.getByRole('navigation', { name: 'Agent sections' })
  await tabs.getByRole('link', { name: 'Settings' }).click()
  await page.getByRole('combobox', { name: 'Driver', exact: true }).selectOption('codex')
  await page.getByRole('button', { name: 'Save', exact: true }).click()
  await visible(page.getByText('Saved.', { exact: true }), 'the saved driver')
  await tabs.getByRole('link', { name: 'Conversation' }).click()
  const live = await sendAndComplete(page, 'please run a command')
  await visible(page.getByRole('list', { name: 'Thread' }).getByText('The command printed from-the-cli.'), 'the CLI’s answer in the thread')
  await live.getByRole('link', { name: /^open run / }).click()
  await visible(page.getByRole('heading', { name: /^Codex CLI run /, level: 1 }), 'the CLI run’s page, named by its driver')
  const timeline = page.getByRole('list', { name: 'Run timeline' })
  const command = timeline.locator('.tl').filter({ has: page.locator('.tl-title', { hasText: /^Ran a command$/ }) })
  await hasText(command.locator('.tl-detail').first(), '$ echo from-the-cli', 'the command, unwrapped from its shell')
  await hasText(command.locator('.tl-fold summary'), 'Output (1 line)', 'the command’s output, folded')
  await hasText(command.locator('.tl-facts'), 'succeeded', 'how the command ended')
  const warning = timeline.locator('.tl.tl-warn').filter({ has: page.locator('.tl-title', { hasText: /^CLI warning$/ }) })
  await hasText(warning, 'Model metadata for `scripted` not found', 'Codex’s warning, as a warning')
  await count(timeline.locator('.tl.tl-bad'), 0, 'errors in a CLI run that completed')
  const message = timeline.locator('.tl').filter({ has: page.locator('.tl-title', { hasText: /^Message$/ }) })
  await hasText(message.locator('.tl-markdown'), 'The command printed from-the-cli.', 'the model’s message, as a step')
  const finished = timeline.locator('.tl').filter({ has: page.locator('.tl-title', { hasText: /^Codex CLI finished$/ }) })
  await hasText(finished.locator('.tl-fold summary'), 'Warnings it printed', 'what Codex printed besides its events, folded')
  const text = (await timeline.textContent()) ?? ''
  for (const raw of ['"type":"thread.started"', '"item.completed"', '"type":"turn.completed"']) {
    if (text.includes(raw)) fail(`the CLI run's timeline shows its JSON events (${raw})`)
  }
  await shot(page, 'cli-transcript')
}

/** The run page's summary fact named name. */
function runFact(page, name) {
  return page.locator('dl.facts .fact').filter({ has: page.locator('dt', { hasText: new RegExp(`^${name}$`) }) }).locator('dd')
}

/**
 * A terminal run: its summary follows the stream (admitted, then running),
 * and when its person stops it, it reads "ended", not "cancelled".
 */
export async function terminalRunEnds(page, agentURL) {
  await page.goto(agentURL)
  await page.getByRole('button', { name: 'Start a terminal run', exact: true }).click()
  await visible(page.getByRole('heading', { name: /^Terminal run /, level: 1 }), 'the terminal run’s page')
  await hasText(runFact(page, 'Status'), 'running', 'the terminal run’s summary, followed live')
  await page.getByRole('button', { name: 'Terminal', exact: true }).click()
  const term = page.getByTestId('terminal')
  await term.locator('.xterm').click()
  await page.keyboard.type('echo at-the-terminal\n')
  await hasText(term.locator('.xterm-rows'), 'at-the-terminal', 'the shell’s echo')
  await page.getByRole('button', { name: 'Stop', exact: true }).click()
  await hasText(page.locator('.run-status'), 'ended', 'the terminal run’s status after its person stopped it')
  await hasText(runFact(page, 'Status'), 'ended', 'the summary’s status after the stop')
  for (const where of [page.locator('.run-status'), runFact(page, 'Status')]) {
    if (((await where.textContent()) ?? '').includes('cancelled')) fail('a terminal run its person stopped reads “cancelled”')
  }
  await hasText(page.getByRole('list', { name: 'Run timeline' }).locator('.tl-type-ended .tl-title'), 'Ended', 'the timeline’s end')
  await shot(page, 'terminal-ended')
}

/** At 390×844 no listed page scrolls sideways (a diff may scroll inside its own box). */
export async function narrowScreens(page, pages) {
  await page.setViewportSize({ width: 390, height: 844 })
  try {
    for (const { name, url, ready } of pages) {
      await page.goto(url)
      await visible(ready(page), `the ${name} page at 390 px`)
      const { width, inner, wide } = await page.evaluate(() => ({
        width: document.documentElement.scrollWidth,
        inner: window.innerWidth,
        // What sticks out, to say where to look.
        wide: [...document.querySelectorAll('body *')]
          .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 0.5)
          .slice(0, 5)
          .map((el) => `${el.tagName.toLowerCase()}${el.className ? `.${String(el.className).trim().split(/\s+/).join('.')}` : ''}`),
      }))
      if (width > inner) fail(`the ${name} page is ${width} px wide at ${inner} px: it scrolls sideways (${wide.join(', ')})`)
      // Nor does a control stick out of the box it is in.
      const outside = await page.evaluate(() =>
        [...document.querySelectorAll('fieldset input, fieldset select, fieldset textarea')]
          .filter((el) => el.getBoundingClientRect().right > el.closest('fieldset').getBoundingClientRect().right + 0.5)
          .map((el) => el.labels?.[0]?.textContent ?? el.tagName.toLowerCase()),
      )
      if (outside.length > 0) fail(`on the ${name} page at 390 px, controls stick out of their fieldset: ${outside.join(', ')}`)
      await shot(page, `mobile-${name}`)
    }
  } finally {
    await page.setViewportSize({ width: 1280, height: 900 })
  }
}

// ==== Where work waits, first run, models and limits (issue 25; keep together) ====

/** A brand-new server's sign-in page is the first-run screen: the first account administers the server. */
export async function firstRunScreen(page, base) {
  const setup = await (await page.request.get(`${base}/api/setup`)).json()
  if (setup.first_run !== true || setup.signup !== 'open') fail(`a brand-new server's /api/setup says ${JSON.stringify(setup)}`)
  await page.goto(`${base}/`)
  await visible(page.getByRole('heading', { name: 'Create the admin account', level: 1 }), 'the first-run screen')
  if (!new URL(page.url()).pathname.startsWith('/login')) fail(`a signed-out visitor is at ${page.url()}, not the sign-in page`)
  await hasText(page.getByRole('note'), 'You are the first person here', 'the first-run words')
  await hasText(page.getByRole('note'), 'This account administers the server', 'the first-run words')
  await shot(page, 'first-run')
}

/** The first person creates the admin account there; the server is new no more, and the header's links stand apart. */
export async function firstRunSignUp(page, base, email, name, password) {
  await page.getByLabel('Email', { exact: true }).fill(email)
  await page.getByLabel('Name', { exact: true }).fill(name)
  await page.getByLabel('Password', { exact: true }).fill(password)
  await page.getByRole('button', { name: 'Create the admin account', exact: true }).click()
  await visible(page.getByRole('heading', { name: 'Agents', level: 1 }), `${name}'s agents list after creating the admin account`)
  const me = await (await page.request.get(`${base}/api/me`)).json()
  if (!me.user?.admin) fail(`the first account is not an admin: ${JSON.stringify(me)}`)
  const setup = await (await page.request.get(`${base}/api/setup`)).json()
  if (setup.first_run !== false) fail(`after the first signup /api/setup still says ${JSON.stringify(setup)}`)
  // "AgentsLibrary" no more: each link of the header stands apart from the next.
  const nav = page.getByRole('navigation', { name: 'Main' })
  const boxes = []
  for (const link of [nav.getByRole('link', { name: 'Agents', exact: true }), nav.getByRole('link', { name: 'Library', exact: true }), nav.getByRole('link', { name: /^Inbox/ })]) {
    boxes.push(await link.boundingBox())
  }
  for (let i = 1; i < boxes.length; i++) {
    const gap = boxes[i].x - (boxes[i - 1].x + boxes[i - 1].width)
    if (boxes[i].y === boxes[i - 1].y && gap < 8) fail(`the header's links run together: ${gap.toFixed(1)} px between link ${i} and ${i + 1}`)
  }
}

/** The description of the field labelled label: its hint (the default of a limit, the model list's word). */
async function hintOf(page, control) {
  const id = await control.getAttribute('aria-describedby')
  if (!id) fail('the field has no hint')
  return ((await page.locator(`[id="${id}"]`).textContent()) ?? '').trim()
}

/** Settings: the model picker offers the provider's models (the fake's), limits read in units with the server's defaults. */
export async function modelsAndLimits(page, base) {
  const tabs = page.getByRole('navigation', { name: 'Agent sections' })
  await tabs.getByRole('link', { name: 'Settings' }).click()
  const model = page.getByRole('combobox', { name: 'Model', exact: true })
  await visible(model, 'the model picker')
  const options = (await model.locator('option').allTextContents()).map((o) => o.trim())
  // scripted-mini is only on the fake provider's GET /v1/models: the list is the provider's.
  const want = ['Server default (scripted)', 'scripted (the default)', 'scripted-mini', 'Other…']
  if (JSON.stringify(options) !== JSON.stringify(want)) fail(`the model picker offers ${JSON.stringify(options)}, not ${JSON.stringify(want)}`)
  const memory = page.getByRole('textbox', { name: 'Memory', exact: true })
  const wants = [
    ['Memory', 'default: 512 MiB'],
    ['Most runs', 'default: no limit'],
    ['Run time limit', 'default: 30 min'],
    ['CPU time per run', 'default: the run’s time on one core (30 min)'],
    ['Disk per run', 'default: 1 GiB'],
    ['Files per run', 'default: 100,000'],
  ]
  for (const [label, want] of wants) {
    const field = page.getByRole('textbox', { name: label, exact: true })
    await until(`the default under ${label} to read “${want}”`, async () => (await hintOf(page, field)) === want)
  }
  await model.selectOption('scripted-mini')
  await memory.fill('1')
  await page.getByRole('combobox', { name: 'Memory unit', exact: true }).selectOption('GiB')
  await page.getByRole('button', { name: 'Save', exact: true }).click()
  await visible(page.getByText('Saved.', { exact: true }), 'the saved notice')
  const id = new URL(page.url()).pathname.split('/')[2]
  const agent = await (await page.request.get(`${base}/api/agents/${id}`)).json()
  if (agent.model !== 'scripted-mini' || agent.limits.memory_bytes !== 1024 ** 3) {
    fail(`saved model ${agent.model} and memory ${agent.limits.memory_bytes}, want scripted-mini and 1 GiB in bytes`)
  }
  await page.reload()
  await until('the memory limit to read 1 GiB after a reload', async () => (await memory.inputValue()) === '1' && (await page.getByRole('combobox', { name: 'Memory unit', exact: true }).inputValue()) === 'GiB')
  await shot(page, 'settings')
  await tabs.getByRole('link', { name: 'Conversation' }).click()
}

/** After the run: the call to action on the conversation, the counts on the Changes tab, the agent and the Inbox, and the inbox. */
export async function reviewWaiting(page, agentName, agentURL) {
  const callout = page.getByRole('region', { name: 'Waiting for review' })
  await hasText(callout, '2 files wait for your review', 'the call to action after the run')
  const tabs = page.getByRole('navigation', { name: 'Agent sections' })
  await visible(tabs.getByRole('link', { name: 'Changes (1 waiting)' }), 'the count on the Changes tab')
  const nav = page.getByRole('navigation', { name: 'Main' })
  // The run's end moved the agent's count: the header follows, with no navigation.
  await visible(nav.getByRole('link', { name: 'Inbox (1 waiting)' }), 'the count on the Inbox link once the run left its change set')
  await shot(page, 'review-callout')
  // The first screen of an agent's conversation with its call to action (the README's screenshot).
  await page.evaluate(() => window.scrollTo(0, 0))
  await page.screenshot({ path: join(artifacts, 'overview.png') })
  await nav.getByRole('link', { name: 'Agents', exact: true }).click()
  const row = page.getByRole('row').filter({ hasText: agentName })
  await visible(row.getByRole('link', { name: '(1 waiting)' }), 'the count on the agent in the list')
  await visible(nav.getByRole('link', { name: 'Inbox (1 waiting)' }), 'the count on the Inbox link')
  await nav.getByRole('link', { name: /^Inbox/ }).click()
  await visible(page.getByRole('heading', { name: 'Inbox', level: 1 }), 'the inbox')
  const item = page.getByRole('row').filter({ hasText: agentName })
  await hasText(item, '2 files wait for your review', 'the change set in the inbox')
  await count(page.getByRole('table').getByRole('row'), 2, 'rows of the inbox (a header and one change set)')
  await shot(page, 'review-inbox')
  await page.goto(agentURL)
  await callout.getByRole('link', { name: 'Review the change set' }).click()
  await visible(page.getByRole('heading', { name: /^Change set /, level: 1 }), 'the change set the call to action leads to')
  await page.goto(agentURL)
}

/** Once decided, nothing waits: no call to action, no counts, an empty inbox. Back on the change set afterwards. */
export async function reviewDecided(page, agentName, agentURL) {
  const here = page.url()
  const nav = page.getByRole('navigation', { name: 'Main' })
  await nav.getByRole('link', { name: /^Inbox/ }).click()
  await visible(page.getByText('Nothing waits for your review.', { exact: true }), 'the empty inbox')
  await visible(nav.getByRole('link', { name: 'Inbox', exact: true }), 'the Inbox link without a count')
  await nav.getByRole('link', { name: 'Agents', exact: true }).click()
  const row = page.getByRole('row').filter({ hasText: agentName })
  await visible(row, 'the agent in the list')
  await count(row.getByRole('link', { name: /waiting/ }), 0, 'counts on the agent once decided')
  await page.goto(agentURL)
  await visible(page.getByRole('navigation', { name: 'Agent sections' }).getByRole('link', { name: 'Changes', exact: true }), 'the Changes tab without a count')
  await count(page.getByRole('region', { name: 'Waiting for review' }), 0, 'calls to action once decided')
  await page.goto(here)
}

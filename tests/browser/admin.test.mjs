// admin.test.mjs -- the admin page in Debian's chromium, headless, driven
// by puppeteer-core (run by admin.sh, which starts doctxd and makes the
// pending transfer, the dead job and the held lock).  Each step prints
// "# ok STEP"; any failure, JavaScript exception (pageerror) or console
// error fails the run with exit 1.  Screenshots go to $SHOTS.
import puppeteer from 'puppeteer-core';
import { strict as assert } from 'node:assert';

const URL = process.env.ADMIN_URL;
const TOKEN = process.env.ADMIN_TOKEN;
const READ_TOKEN = process.env.READ_TOKEN;
const SHOTS = process.env.SHOTS;
const STEP_MS = 8000;

const errors = [];
let expected401 = false; // while signing in with a bad token on purpose

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: [...(process.getuid && process.getuid() === 0 ? ['--no-sandbox'] : []),
    '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
    '--window-size=1280,900'],
  defaultViewport: { width: 1280, height: 860 },
});
const done = (code) => browser.close().finally(() => process.exit(code));
setTimeout(() => { console.log('# FAIL: overall time limit'); done(1); }, 45000).unref();

try {
  const page = await browser.newPage();
  page.setDefaultTimeout(STEP_MS);
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (expected401 && /status of 40[13]/.test(m.text())) return;
    errors.push('console.error: ' + m.text());
  });
  const step = (name) => console.log('# ok ' + name);
  const shot = async (name) => { // the newest toast only, for a tidy picture
    await page.$$eval('#toast div', (ds) => ds.slice(0, -1).forEach((d) => d.remove()));
    await page.screenshot({ path: `${SHOTS}/admin-${name}.png` });
  };
  // Clicks what sel names now: the views re-render their rows on every
  // refresh, so an element handle found a moment ago may be gone.
  const clickNow = (sel) => page.$eval(sel, (e) => e.click());
  const noErrors = (where) => assert.deepEqual(errors, [], where + ': ' + errors.join('; '));

  // The page and its strict CSP: its own script and style only.
  const resp = await page.goto(URL + '/admin', { waitUntil: 'load' });
  assert.equal(resp.status(), 200);
  const csp = resp.headers()['content-security-policy'] || '';
  for (const d of ["default-src 'none'", "script-src 'self'", "style-src 'self'",
    "connect-src 'self'", "frame-ancestors 'none'"])
    assert.ok(csp.includes(d), 'CSP lacks ' + d + ': ' + csp);
  await page.waitForSelector('#login:not([hidden])');
  step('the page loads under its CSP and asks for a token');

  // A token that is not known, then one without the admin scope: refused.
  expected401 = true;
  await page.type('#token', 'not-a-token-0123456789');
  await page.click('#login-form button');
  await page.waitForFunction(() => /not known/.test(document.querySelector('#login-error').textContent));
  await page.type('#token', READ_TOKEN);
  await page.click('#login-form button');
  await page.waitForFunction(() => /admin scope/.test(document.querySelector('#login-error').textContent));
  expected401 = false;
  step('an unknown token and a read token are refused');

  // Sign in: the dashboard shows the counts the CLI made.
  await page.type('#token', TOKEN);
  await page.click('#login-form button');
  await page.waitForSelector('#app:not([hidden])');
  await page.waitForSelector('[data-count="transfers"]');
  const counts = await page.$$eval('#counts .card', (cards) => Object.fromEntries(
    cards.map((c) => [c.dataset.count, Object.fromEntries([...c.querySelectorAll('.kv span:nth-child(odd)')]
      .map((k) => [k.textContent, Number(k.nextElementSibling.textContent)]))])));
  assert.equal(counts.transfers.initiated, 1, JSON.stringify(counts));
  assert.equal(counts['jobs (all queues)'].dead, 1, JSON.stringify(counts));
  assert.equal(counts.locks.held, 1, JSON.stringify(counts));
  assert.match(await page.$eval('[data-queue="mail"]', (r) => r.textContent), /^mail0001$/);
  assert.equal(await page.evaluate(() => sessionStorage.getItem('doctx.admin.token')), TOKEN);
  await page.waitForSelector('#chart-throughput polyline');
  step('signed in; the dashboard counts 1 pending transfer, 1 dead job, 1 held lock, and charts traffic');
  await shot('dashboard');

  // The audit: run one, see its verdict.
  await page.click('#tabs [data-view="audit"]');
  await page.click('#audit-run');
  await page.waitForSelector('#audit-verdict');
  const verdict = await page.$eval('#audit-verdict', (e) => e.textContent);
  assert.equal(verdict, 'clean');
  step('ran an audit: clean');
  await shot('audit');

  // The pending transfer: cancel it, see it end failed (canceled).
  await page.click('#tabs [data-view="transfers"]');
  const row = 'tr[data-id="tx-pending"]';
  await page.waitForSelector(row);
  assert.match(await page.$eval(row, (r) => r.textContent), /initiated/);
  await clickNow(row + ' button');
  await page.waitForFunction((sel) => {
    const r = document.querySelector(sel);
    return r && /failed/.test(r.textContent) && /canceled/.test(r.textContent);
  }, {}, row);
  step('canceled the pending transfer: it is failed (canceled)');
  await shot('transfers');

  // The dead job: find it in its queue, open it, retry it, see it ready.
  await page.click('#tabs [data-view="jobs"]');
  await page.$eval('#jobs-queue', (e) => { e.value = ''; });
  await page.type('#jobs-queue', 'mail');
  await page.select('#jobs-state', 'dead');
  const job = '#jobs-table tr[data-id="job-dead"]';
  await page.waitForSelector(job);
  await clickNow(job);
  await page.waitForFunction(() => /exit status 1/.test(document.querySelector('#job-detail').textContent));
  await clickNow(job + ' button');
  await page.waitForFunction((sel) => {
    const r = document.querySelector(sel);
    return r && /ready/.test(r.querySelector('td:nth-child(3)').textContent);
  }, {}, job);
  await page.waitForFunction(() => /"state": "ready"/.test(document.querySelector('#job-detail pre').textContent));
  step('found the dead job, opened it, retried it: it is ready');
  await shot('jobs');

  // The held lock: force-release it (after the page's confirm), see it free.
  page.on('dialog', (d) => d.accept());
  await page.click('#tabs [data-view="locks"]');
  const lock = '#locks-table tr[data-name="nightly-report"]';
  await page.waitForSelector(lock);
  assert.match(await page.$eval(lock, (r) => r.textContent), /held.*cron@host1/);
  await shot('locks');
  await clickNow(lock + ' button');
  await page.waitForFunction((sel) => {
    const r = document.querySelector(sel);
    return r && /free/.test(r.querySelector('td:nth-child(2)').textContent);
  }, {}, lock);
  step('force-released the held lock: it is free');

  // A finished job: delete it (after the page's confirm); it is gone.
  await page.click('#tabs [data-view="jobs"]');
  await page.select('#jobs-state', 'canceled');
  const old = '#jobs-table tr[data-id="job-old"]';
  await page.waitForSelector(old);
  assert.equal(await page.$eval(old + ' button:nth-of-type(3)', (b) => b.textContent), 'Delete');
  await clickNow(old + ' button:nth-of-type(3)');
  await page.waitForFunction((sel) => !document.querySelector(sel), {}, old);
  const gone = await fetch(URL + '/v1/jobs/job-old', { headers: { Authorization: 'Bearer ' + TOKEN } });
  assert.equal(gone.status, 404, 'job-old after its delete: ' + gone.status);
  step('deleted the canceled job: it is gone');

  // Money made up behind the patterns' back (a bypassing plain write): the
  // next audit the page runs says findings, and names them.
  const tamper = await fetch(URL + '/v1/c/accounts/update', {
    method: 'POST', headers: { Authorization: 'Bearer ' + TOKEN, 'Content-Type': 'application/json' },
    body: JSON.stringify({ filter: { _id: 'bob' }, update: { $inc: { balance: 5 } }, bypass_validation: true }),
  });
  assert.equal(tamper.status, 200, 'tamper: ' + await tamper.text());
  await page.click('#tabs [data-view="audit"]');
  await page.click('#audit-run');
  await page.waitForFunction(() => {
    const v = document.querySelector('#audit-verdict');
    return v && v.textContent === 'findings';
  });
  assert.match(await page.$eval('#audit-findings', (e) => e.textContent), /^transfer \//);
  step('after a bypassing write the audit shows findings, naming the transfer pattern');

  // The page's own checks ran on every refresh: no error anywhere.
  await new Promise((r) => setTimeout(r, 300));
  noErrors('the page');
  step('no JavaScript error and no console error');
  console.log('# all steps passed');
  await done(0);
} catch (err) {
  console.log('# FAIL: ' + (err && err.stack || err));
  if (errors.length) console.log('# page errors: ' + errors.join('; '));
  await done(1);
}

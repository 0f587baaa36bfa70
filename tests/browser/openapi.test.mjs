// openapi.test.mjs -- GET /openapi.json is valid OpenAPI 3.1 by a real
// validator (@apidevtools/swagger-parser, pinned in package-lock.json),
// and describes exactly the routes of THE route table, read from
// src/server/routes.c itself: every {METHOD, PATTERN, SCOPE} line there is
// an operation with that method and path, its path parameters and its
// scope as the bearer role, and no operation is there that the table
// lacks.  Run by admin.sh (ADMIN_URL, ROUTES_C).  Prints "# ok ..." lines;
// exit 1 on the first failure.
import SwaggerParser from '@apidevtools/swagger-parser';
import { readFileSync } from 'node:fs';
import { strict as assert } from 'node:assert';

const step = (name) => console.log('# ok ' + name);
try {
  const r = await fetch(process.env.ADMIN_URL + '/openapi.json');
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^application\/json/);
  const doc = await r.json();
  assert.equal(doc.openapi, '3.1.0');
  await SwaggerParser.validate(structuredClone(doc));
  step('GET /openapi.json is valid OpenAPI 3.1 (swagger-parser)');

  const src = readFileSync(process.env.ROUTES_C, 'utf8');
  const scopes = { R: 'read', W: 'write', A: 'admin', M: 'metrics', DTX__SRV_SCOPE_NONE: null };
  const re = /\{"(GET|POST|PUT|DELETE|PATCH)",\s*"([^"]+)",\s*(\w+),/g;
  const table = [...src.matchAll(re)].map((m) => ({ method: m[1].toLowerCase(), path: m[2], scope: m[3] }));
  assert.ok(table.length >= 20, 'routes.c: only ' + table.length + ' routes parsed');
  for (const t of table) {
    const op = doc.paths[t.path] && doc.paths[t.path][t.method];
    assert.ok(op, `${t.method.toUpperCase()} ${t.path} is in routes.c but not in /openapi.json`);
    const want = scopes[t.scope];
    assert.ok(want !== undefined, 'unknown scope ' + t.scope);
    assert.deepEqual(op.security, want ? [{ bearer: [want] }] : [],
      `${t.method} ${t.path}: security`);
    const params = (t.path.match(/\{(\w+)\}/g) || []).map((p) => p.slice(1, -1));
    const declared = (op.parameters || []).filter((p) => p.in === 'path').map((p) => p.name);
    assert.deepEqual(declared, params, `${t.method} ${t.path}: path parameters`);
    if (want) {
      for (const code of ['401', '403', '429'])
        assert.ok(op.responses[code], `${t.method} ${t.path}: no ${code}`);
    }
  }
  let ops = 0;
  for (const item of Object.values(doc.paths)) ops += Object.keys(item).length;
  assert.equal(ops, table.length, 'operations in /openapi.json vs routes in routes.c');
  step(`every one of the ${table.length} routes of routes.c is described, with its parameters and scope, and nothing else`);

  // A body field's type, as the dispatcher checks it.
  const find = doc.paths['/v1/c/{coll}/find'].post.requestBody.content['application/json'].schema;
  assert.equal(find.additionalProperties, false);
  assert.equal(find.properties.limit.type, 'integer');
  assert.equal(find.properties.filter.type, 'object');
  step('body fields carry their types; unknown fields are refused (additionalProperties false)');
  assert.ok(doc.paths['/v1/accounts'].post.responses['201'], 'account create: 201');
  assert.ok(doc.paths['/v1/queues/{q}/jobs'].post.responses['201'] &&
    doc.paths['/v1/queues/{q}/jobs'].post.responses['200'], 'job add: 201 and 200');
  step('success statuses other than 200 are described (account create 201, job add 201 or 200)');
  console.log('# all steps passed');
} catch (err) {
  console.log('# FAIL: ' + (err && err.stack || err));
  process.exit(1);
}

// A node:test reporter that writes one JSON line per finished test (not per suite), for the
// compat runner's ratchet: {file, name, line, passed, skipped}. Tests made by one helper share
// a line and may share a name; a repeat gets ` #2`, ` #3`... in the order the tests run.
import path from 'node:path';

export default async function* results(source) {
  const seen = new Map();
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const data = event.data;
    if (data.details?.type === 'suite' || !data.file) continue;
    const id = `${data.file}:${data.line} ${data.name}`;
    const count = (seen.get(id) || 0) + 1;
    seen.set(id, count);
    const record = {
      file: path.basename(data.file),
      name: count > 1 ? `${data.name} #${count}` : data.name,
      line: data.line,
      passed: event.type === 'test:pass',
      skipped: Boolean(data.skip),
    };
    yield `${JSON.stringify(record)}\n`;
  }
}

// A node:test reporter that writes one JSON line per finished test (not per suite), for the
// compat runner's count: {file, name, line, passed, skipped}.
import path from 'node:path';

export default async function* results(source) {
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const data = event.data;
    if (data.details?.type === 'suite' || !data.file) continue;
    const record = {
      file: path.basename(data.file),
      name: data.name,
      line: data.line,
      passed: event.type === 'test:pass',
      skipped: Boolean(data.skip),
    };
    yield `${JSON.stringify(record)}\n`;
  }
}

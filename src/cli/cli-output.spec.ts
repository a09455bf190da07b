import { fileURLToPath } from 'node:url';
import { colorEnabled, colors, isEntryFile, plural } from './cli-output.js';

describe(colorEnabled.name, () => {
  it.each([
    [true, {}, true],
    [false, {}, false],
    [undefined, {}, false],
    [true, { NO_COLOR: '1' }, false],
    [true, { NO_COLOR: '' }, true],
  ])('on a TTY %s with env %j: %s', (isTTY, env, expected) => {
    expect(colorEnabled({ isTTY }, env)).toBe(expected);
  });
});

describe(colors.name, () => {
  it('wraps text in ANSI codes only when enabled', () => {
    expect(colors(true).red('x')).toBe('\u001b[31mx\u001b[39m');
    expect(colors(false).red('x')).toBe('x');
  });
});

describe(plural.name, () => {
  it('uses the singular for exactly one', () => {
    expect([plural(0, 'file'), plural(1, 'file'), plural(2, 'file'), plural(2, 'entry', 'entries')]).toEqual([
      '0 files',
      '1 file',
      '2 files',
      '2 entries',
    ]);
  });
});

describe(isEntryFile.name, () => {
  it('is true only for the script node was started with', () => {
    const url = new URL('./cli-output.ts', import.meta.url).href;
    expect(isEntryFile(url, fileURLToPath(url))).toBe(true);
    expect(isEntryFile(url, process.argv[1])).toBe(false);
    expect(isEntryFile(url, undefined)).toBe(false);
  });
});

import { readCookie, sessionCookie } from './cookies.js';

describe(readCookie.name, () => {
  it.each<[string, string | undefined, string | undefined]>([
    ['the one cookie', 'engine_console=abc', 'abc'],
    ['among others, with spaces', 'a=1; engine_console=abc ; b=2', 'abc'],
    ['a quoted value', 'engine_console="abc"', 'abc'],
    ['an encoded value', 'engine_console=a%2Fb', 'a/b'],
    ['a cookie whose name only ends with it', 'xengine_console=abc', undefined],
    ['no such cookie', 'a=1; b=2', undefined],
    ['no header', undefined, undefined],
    ['a value that is not valid percent-encoding', 'engine_console=%E0%A4%A', undefined],
  ])('reads %s', (_case, header, expected) => {
    expect(readCookie(header, 'engine_console')).toBe(expected);
  });
});

describe(sessionCookie.name, () => {
  it('is HttpOnly and SameSite=Strict for the whole origin, Secure over HTTPS only', () => {
    expect(sessionCookie('s', 'id/1', { secure: false })).toBe('s=id%2F1; Path=/; HttpOnly; SameSite=Strict');
    expect(sessionCookie('s', 'x', { secure: true })).toBe('s=x; Path=/; HttpOnly; SameSite=Strict; Secure');
  });

  it('deletes the cookie with Max-Age=0', () => {
    expect(sessionCookie('s', '', { secure: false, maxAgeSeconds: 0 })).toMatch(/; Max-Age=0$/);
  });
});

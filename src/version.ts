/** The engine's version, as the admin API's OpenAPI document and the service's User-Agent show it. */
export const ENGINE_VERSION = '0.1.0';

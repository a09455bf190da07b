/** The secrets every test engine runs with; the secret watch fails a suite in which one shows up. */
export const TEST_SECRET = 'whsec_test_secret_value_1234';
export const TEST_API_KEY = 'ac_test_e2e_key_abcdef123456';
export const TEST_ADMIN_TOKEN = 'admin_token_for_tests_0123456789';

package x

const inTest = `SELECT count(*) FROM mink_b`

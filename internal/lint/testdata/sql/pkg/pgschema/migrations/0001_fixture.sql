CREATE TABLE mink_a (id bigint PRIMARY KEY);
CREATE TABLE IF NOT EXISTS mink_b (id bigint PRIMARY KEY);
CREATE TABLE mink_c (id bigint PRIMARY KEY);

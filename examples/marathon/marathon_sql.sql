-- The marathon query of marathon.sql in the SQL:2016 MATCH_RECOGNIZE form.
-- It lowers to the same AST as the compact form.
CREATE STREAM marathon (
  time        TIMESTAMP,
  checkpoint  ENUM('Staten Island','Brooklyn','Queens','Bronx','Manhattan'),
  runner      UINT16,
  speed       UINT16
);

SELECT * FROM marathon MATCH_RECOGNIZE (
  PARTITION BY runner
  ORDER BY time
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN ( A NOTB* C | A NOTC* D | A NOTD* E )
  DEFINE
    A    AS checkpoint = 'Staten Island',
    NOTB AS checkpoint != 'Brooklyn',
    C    AS checkpoint = 'Queens',
    NOTC AS checkpoint != 'Queens',
    D    AS checkpoint = 'Bronx',
    NOTD AS checkpoint != 'Bronx',
    E    AS checkpoint = 'Manhattan'
);

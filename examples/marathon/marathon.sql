-- The marathon query of Woods, Teubner and Alonso (VLDB 2010, §2), compact form:
-- report a runner who, after Staten Island, reaches Queens before Brooklyn,
-- the Bronx before Queens, or Manhattan before the Bronx — checkpoints skipped.
CREATE STREAM marathon (
  time        TIMESTAMP,
  checkpoint  ENUM('Staten Island','Brooklyn','Queens','Bronx','Manhattan'),
  runner      UINT16,
  speed       UINT16
);

PARTITION BY runner
PATTERN ( A NOTB* C | A NOTC* D | A NOTD* E )
DEFINE
  A    AS checkpoint = 'Staten Island',
  NOTB AS checkpoint != 'Brooklyn',
  C    AS checkpoint = 'Queens',
  NOTC AS checkpoint != 'Queens',
  D    AS checkpoint = 'Bronx',
  NOTD AS checkpoint != 'Bronx',
  E    AS checkpoint = 'Manhattan';

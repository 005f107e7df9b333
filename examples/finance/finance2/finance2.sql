-- finance2 of Hirzel, "Partition and Compose" (DEBS 2012), Table 5: a rise,
-- then a flat stretch, within a time window (after Cayuga's stock
-- subscription 2). Per symbol, within 60 seconds: prices that never fall,
-- up at least 0.2 % from the first trade; the rise ends with a trade a little
-- below the top (riseEnd); trades stay within 0.1 % below the top (flat);
-- the match ends at the first trade that leaves that band (flatEnd), up or
-- down.
CREATE STREAM trades (
  time    TIMESTAMP,  -- milliseconds
  symbol  CHAR(4),
  price   UINT32,     -- in cents
  volume  UINT32      -- shares
);

NAME finance2
PARTITION BY symbol
WITHIN 60000
MEASURES FIRST(time) AS started, COUNT(*) AS n, FIRST(price) AS base,
         MAX(price) AS top, price AS closing, time - FIRST(time) AS took
PATTERN ( . rise* riseEnd flat* flatEnd )
DEFINE
  rise    AS price >= LAST(price),
  riseEnd AS price < LAST(price) AND price * 1000 >= LAST(price) * 999
             AND LAST(price) * 1000 >= FIRST(price) * 1002,
  flat    AS price <= MAX(price) AND price * 1000 >= MAX(price) * 999,
  flatEnd AS price > MAX(price) OR price * 1000 < MAX(price) * 999;

-- finance5 of Hirzel, "Partition and Compose" (DEBS 2012), Table 5: a large
-- price increase within a time window (after Cayuga's stock subscription 5),
-- written with Hirzel's window idiom: notTooLong = Delta(ts) < w, where
-- Delta is the time since the match began (Hirzel, Table 3). Per symbol: a
-- trade at least 0.5 % above the lowest price of the last 20 seconds.
CREATE STREAM trades (
  time    TIMESTAMP,  -- milliseconds
  symbol  CHAR(4),
  price   UINT32,     -- in cents
  volume  UINT32      -- shares
);

NAME finance5
PARTITION BY symbol
MEASURES FIRST(time) AS started, COUNT(*) AS n, MIN(price) AS low,
         price AS high, time - FIRST(time) AS took
PATTERN ( . notTooLong* largeIncrease )
DEFINE
  notTooLong    AS time - FIRST(time) < 20000,
  largeIncrease AS time - FIRST(time) < 20000 AND price * 1000 >= MIN(price) * 1005;

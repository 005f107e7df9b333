-- The M-shape (double-top) stock pattern of Hirzel, "Partition and Compose:
-- Parallel Complex Event Processing" (DEBS 2012, Fig. 1), after Cayuga's
-- financial subscription 1: per symbol, a price that rises, drops, rises
-- again, and finally falls below where the pattern began.
CREATE STREAM trades (
  time    TIMESTAMP,
  symbol  CHAR(4),
  price   UINT32,     -- in cents
  volume  UINT32
);

-- In DEFINE an aggregate covers the partial match so far, without the
-- current tuple: FIRST(price) is the price of the tuple matched by '.',
-- LAST(price) the price of the previous tuple. In MEASURES it covers the
-- whole match, and a bare field is its value in the match's last tuple.
NAME mshape
PARTITION BY symbol
MEASURES FIRST(time) AS started, COUNT(*) AS steps, MAX(price) AS top,
         price AS closing
PATTERN ( . rise+ drop+ rise+ drop* deep )
DEFINE
  rise AS price >  FIRST(price) AND price >= LAST(price),
  drop AS price >= FIRST(price) AND price <  LAST(price),
  deep AS price <  FIRST(price) AND price <  LAST(price);

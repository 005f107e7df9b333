-- finance0 of Hirzel, "Partition and Compose" (DEBS 2012), Table 5: a large
-- trade followed by a peak, after the stock pattern of Agrawal et al.
-- (SIGMOD 2008). Per symbol: a trade of at least 5,000 shares, then prices
-- that rise trade after trade, then the first trade below the previous one.
-- The closing priceDrop makes the match end at the peak, not at its first
-- rise (matching is eager; Hirzel §2.3).
CREATE STREAM trades (
  time    TIMESTAMP,  -- milliseconds
  symbol  CHAR(4),
  price   UINT32,     -- in cents
  volume  UINT32      -- shares
);

NAME finance0
PARTITION BY symbol
MEASURES FIRST(time) AS started, COUNT(*) AS n, FIRST(volume) AS size,
         FIRST(price) AS entry, MAX(price) AS peak, price AS closing
PATTERN ( largeSize priceRise+ priceDrop )
DEFINE
  largeSize AS volume >= 5000,
  priceRise AS price > LAST(price),
  priceDrop AS price < LAST(price);

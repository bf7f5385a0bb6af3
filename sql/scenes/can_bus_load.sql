-- can_bus_load: a CAN channel busier than $max_load of its $bitrate_bps in consecutive windows
-- of $window_s. A frame's bits: 47 (11-bit id) or 67 (29-bit id) of framing plus 8 per data
-- byte (none for remote frames), times $stuffing for the stuff bits. Reads
-- normalized_can_frames (time_ns, channel, is_extended, is_remote, dlc); the data bytes are
-- not read. score: the highest load over $max_load.
WITH frames AS (
    SELECT channel, time_ns // CAST($window_s * 1e9 AS BIGINT) AS bucket,
           CASE WHEN is_extended THEN 67 ELSE 47 END
               + CASE WHEN coalesce(is_remote, false) THEN 0 ELSE 8 * dlc END AS bits
    FROM normalized_can_frames
    WHERE drive = $drive
),
load AS (
    SELECT channel, bucket, sum(bits) * $stuffing / ($bitrate_bps * $window_s) AS load
    FROM frames
    GROUP BY channel, bucket
    HAVING sum(bits) * $stuffing / ($bitrate_bps * $window_s) >= $max_load
),
runs AS (
    SELECT channel, bucket, load,
           bucket - row_number() OVER (PARTITION BY channel ORDER BY bucket) AS run
    FROM load
)
SELECT $drive AS drive,
       min(bucket) * CAST($window_s * 1e9 AS BIGINT) AS t_start_ns,
       (max(bucket) + 1) * CAST($window_s * 1e9 AS BIGINT) AS t_end_ns,
       'can_bus_load' AS tag, max(load) / $max_load AS score
FROM runs
GROUP BY channel, run
ORDER BY t_start_ns

-- Budget periods, shared by the scripts (redis.go prepends this file to each): the same
-- integer math as period.go. A period is named by an index (total: 0, daily: days since
-- 1970-01-01, monthly: year×12 + month−1) and ends at a microsecond of the script's
-- clock. The calendar math is Howard Hinnant's civil_from_days / days_from_civil.
local floor = math.floor
local DAY = 86400000000

-- civil is the year and month of day z since 1970-01-01 (z >= 0).
local function civil(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m = mp + 3
  if mp >= 10 then
    m = mp - 9
  end
  local y = yoe + era * 400
  if m <= 2 then
    y = y + 1
  end
  return y, m
end

-- days is the number of days from 1970-01-01 to the first of month m of year y.
local function days(y, m)
  if m <= 2 then
    y = y - 1
  end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp = m - 3
  if m <= 2 then
    mp = m + 9
  end
  return era * 146097 + yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + floor((153 * mp + 2) / 5) - 719468
end

-- period_at is the index of the period of kind (1 total, 2 daily, 3 monthly) that
-- contains t (µs) and the microsecond the next one starts (0 for total).
local function period_at(kind, t)
  if kind == 1 then
    return 0, 0
  end
  local day = floor(t / DAY)
  if kind == 2 then
    return day, (day + 1) * DAY
  end
  local y, m = civil(day)
  if m == 12 then
    return y * 12 + 11, days(y + 1, 1) * DAY
  end
  return y * 12 + m - 1, days(y, m + 1) * DAY
end
